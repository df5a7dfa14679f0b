/**
 * `memra perplexity --hellaswag / --winogrande / --multiple-choice` end to end: llama-perplexity's
 * per-task and final lines (from @memra/core's perplexity-task goldens) printed alike, --json, and
 * one-line errors for bad data files and options.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPerplexityTaskGoldens } from "@memra/core/internal";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { formatFixed } from "./perplexity-tasks";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ROOT = new URL("../../../../", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-perplexity-tasks-"));
const goldens = loadPerplexityTaskGoldens().cases;

function run(args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, "perplexity", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", timeout: 240_000 });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

/** The arguments of a golden case for memra: llama-perplexity's, with the F32 KV cache it ran with. */
async function caseArguments(id: string) {
  const c = goldens.find((c) => c.id === id)!;
  const model = await syntheticModelFile(resolveOptions(c.preset, c.options));
  const flag = `--${c.kind}`;
  return { c, args: ["-m", model, "-f", c.data, flag, ...(c.tasks ? [`${flag}-tasks`, String(c.tasks)] : []), ...(c.context ? ["--ctx", String(c.context)] : []), "--kv-type", "f32", "-t", "2"] };
}

describe("formatFixed: C's %.Nf", () => {
  it("rounds exact binary halves to even as printf does, pads to a width, prints NaN as glibc", () => {
    expect(formatFixed(100 / 128, 4)).toBe("0.7812"); // 0.78125 exactly; toFixed gives 0.7813
    expect(formatFixed(0.78125 + 2 ** -40, 4)).toBe("0.7813");
    expect(formatFixed(2.5, 0)).toBe("2");
    expect(formatFixed(3.5, 0)).toBe("4");
    expect(formatFixed(1.005, 2)).toBe("1.00"); // 1.00499999999999989...
    expect(formatFixed(-17.0923442, 6, 10)).toBe("-17.092344");
    expect(formatFixed(-1.5, 6, 10)).toBe(" -1.500000");
    expect(formatFixed(8.333333333333334, 8, 3)).toBe("8.33333333");
    expect(formatFixed(0, 4, 3)).toBe("0.0000");
    expect(formatFixed(1e21, 1)).toBe("1000000000000000000000.0");
    expect(formatFixed(Number.NaN, 4)).toBe("-nan");
  });
});

describe("memra perplexity task scores", () => {
  let tiny = "";
  beforeAll(async () => {
    tiny = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  });

  it("--hellaswag and --multiple-choice print llama-perplexity's lines character for character", async () => {
    for (const id of ["hellaswag-moe-q8_0-20", "multiple-choice-dense-f32-15"]) {
      const { c, args } = await caseArguments(id);
      const result = run(args);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(new RegExp(`^${c.lines.length} of ${c.loaded} tasks scored in \\d+\\.\\d s\\n$`));
      const header = c.kind === "hellaswag" ? "task\tacc_norm\t95% confidence interval" : "task\tacc_norm";
      expect(result.stdout).toBe([header, ...c.lines, ...(c.final.length ? ["", ...c.final] : []), ""].join("\n"));
    }
  }, 240_000);

  it("--winogrande prints llama-perplexity's lines: the same running accuracy, picks and answers, the scores to float rounding", async () => {
    const { c, args } = await caseArguments("winogrande-moe-f32-30");
    const result = run(args);
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(c.lines.length); // under 100 tasks: no final score, as llama.cpp
    lines.forEach((line, i) => {
      const ours = line.split(/\t| {2}/);
      const theirs = c.lines[i]!.split(/\t| {2}/);
      expect([ours[0], ours[1], ours[4], ours[5]], line).toEqual([theirs[0], theirs[1], theirs[4], theirs[5]]);
      expect(ours[2]).toMatch(/^ *-\d+\.\d{6}$/);
      expect(ours[2]!.length).toBe(theirs[2]!.length);
      for (const k of [2, 3]) expect(Math.abs(Number(ours[k]) - Number(theirs[k]))).toBeLessThanOrEqual(2e-3);
    });
  }, 240_000);

  it("--json gives the library's result: every task's pick and log-likelihoods, the accuracy and its error", async () => {
    const { c, args } = await caseArguments("multiple-choice-dense-f32-15");
    const result = run([...args, "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const parsed = JSON.parse(result.stdout);
    expect(parsed.kind).toBe("multiple-choice");
    expect(parsed.available).toBe(c.loaded);
    expect(parsed.tasks.map((t: { task: number }) => t.task)).toEqual(c.selection);
    expect(parsed.tasks[0].logLikelihoods).toHaveLength(parsed.tasks[0].labels.length);
    const [accuracy, error] = c.final[0]!.match(/[\d.]+/g)!.map(Number);
    expect(100 * parsed.accuracy).toBeCloseTo(accuracy!, 4);
    expect(100 * parsed.error).toBeCloseTo(error!, 4);
  }, 240_000);

  it("a malformed data file or a task that does not fit is one line naming the file and where, exit 1", () => {
    const hellaswag = join(directory, "bad.txt");
    writeFileSync(hellaswag, "context\n1\na\nb\nc\nd\ncontext two\nX\na\nb\nc\nd\n");
    const files: Array<[string[], string]> = [
      [["-f", hellaswag, "--hellaswag"], `memra perplexity: ${hellaswag}:8: the gold ending index of task 1 is "X", not 0, 1, 2 or 3\n`],
      [["-f", join(directory, "short.txt"), "--hellaswag"], `memra perplexity: ${join(directory, "short.txt")}: 7 lines, not a multiple of 6 (a HellaSwag task is 6 lines: context, gold ending index, 4 endings)\n`],
      [["-f", join(directory, "bad.csv"), "--winogrande"], `memra perplexity: ${join(directory, "bad.csv")}:2: the sentence has no '_' for the choices to fill\n`],
      [["-f", join(directory, "bad.bin"), "--multiple-choice"], `memra perplexity: ${join(directory, "bad.bin")}: 2 tasks need 8 bytes of task offsets from byte 4, the file has 6 bytes\n`],
      [["-f", hellaswag.replace("bad", "fit"), "--hellaswag", "--ctx", "2"], "memra perplexity: task 0 (task 0 of the file) needs 14 tokens, more than llama-perplexity's context for tasks: 4 × --ctx 2\n"],
    ];
    writeFileSync(join(directory, "short.txt"), "c\n0\na\nb\nc\nd\nextra\n");
    writeFileSync(join(directory, "bad.csv"), "0,The _ sat.,cat,dog,1\n1,No blank here.,cat,dog,2\n2,The _ ran.,cat,dog,1\n");
    writeFileSync(join(directory, "bad.bin"), Uint8Array.of(2, 0, 0, 0, 9, 9));
    writeFileSync(hellaswag.replace("bad", "fit"), "A context of several words\n1\nand one ending\nand another one\nand a third\nand a fourth\n");
    for (const [args, message] of files) {
      const result = run(["-m", tiny, ...args]);
      expect(result.code, message).toBe(1);
      expect(result.stderr).toBe(message);
      expect(result.stdout).toBe("");
    }
  }, 120_000);

  it("refuses two task scores at once, a task count without its score, and a task score with --kl-divergence", () => {
    const file = join(directory, "any.txt");
    writeFileSync(file, "x\n");
    expect(run(["-m", tiny, "-f", file, "--hellaswag", "--winogrande"]).stderr).toBe("memra perplexity: --hellaswag and --winogrande cannot be combined: one task score a run\n");
    expect(run(["-m", tiny, "-f", file, "--winogrande-tasks", "3"]).stderr).toBe("memra perplexity: --winogrande-tasks needs --winogrande\n");
    expect(run(["-m", tiny, "-f", file, "--multiple-choice", "--multiple-choice-tasks=-1"]).stderr).toMatch(/--multiple-choice-tasks must be a non-negative integer/);
    expect(run(["-m", tiny, "-f", file, "--hellaswag", "--kl-divergence", tiny]).stderr).toBe("memra perplexity: --hellaswag takes neither --kl-divergence, --kl-divergence-base nor --ppl-stride\n");
  }, 60_000);
});
