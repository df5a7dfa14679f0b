/**
 * `memra imatrix` writes the file computeImatrix's result encodes to (the same backend, settings and
 * dataset name), and turns bad input into one line and exit code 1.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { ReferenceBackend, computeImatrix } from "@memra/core";
import { IMATRIX_BOUNDS, imatrixCalibrationText, imatrixDeviation, loadImatrixGoldens } from "@memra/core/internal";
import { encodeImatrix, readImatrix } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CALIBRATION = new URL("../../../core/src/__fixtures__/imatrix/calibration.txt", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-imatrix-cli-"));
let moe = "";

function run(...args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, "imatrix", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

beforeAll(async () => {
  const golden = loadImatrixGoldens().cases.find((c) => c.model === "moe-f32")!;
  moe = await syntheticModelFile(resolveOptions(golden.preset, golden.options));
}, 120_000);

describe("memra imatrix", () => {
  it("writes computeImatrix's imatrix, byte for byte, and reports progress and a summary", () => {
    const output = join(directory, "moe.gguf");
    // (--output-frequency 1: rewritten after each chunk through a .partial file renamed over it)
    const result = run("-m", moe, "-f", CALIBRATION, "-o", output, "-c", "64", "--chunks", "2", "--kv-type", "f32", "--device", "reference", "--output-frequency", "1");
    expect(result.code, result.stderr).toBe(0);
    expect(existsSync(`${output}.partial`)).toBe(false);
    const expected = computeImatrix(moe, imatrixCalibrationText(), { backend: new ReferenceBackend(), contextSize: 64, chunks: 2, kvType: "f32", dataset: CALIBRATION });
    expect(Buffer.compare(readFileSync(output), Buffer.from(encodeImatrix(expected)))).toBe(0);
    expect(readImatrix(output).datasets).toEqual([CALIBRATION]);
    expect(result.stderr).toMatch(/^importance matrix on reference: 298 tokens, 2 chunks of 64; [\d.]+ s for the first\n\[1\][\d.]+,\[2\][\d.]+,\n$/);
    expect(result.stdout).toMatch(new RegExp(`^${output}: 16 entries over 2 chunks of 64 tokens \\(2 evaluated, the text has 298 tokens\\); final estimate PPL = [\\d.]+; [\\d.]+ s\\n$`));
  }, 120_000);

  it("--output-frequency: a run stopped after its first chunk has left that chunk's imatrix in OUTPUT", async () => {
    const output = join(directory, "stopped.gguf");
    // one chunk of 16 a step: the output is due as the first weight's count passes 16, before "[1]" is printed
    const child = Bun.spawn(["bun", MAIN, "imatrix", "-m", moe, "-f", CALIBRATION, "-o", output, "-c", "16", "-b", "16", "--output-frequency", "1", "--device", "reference"], { stdout: "ignore", stderr: "pipe" });
    let stderr = "";
    const decoder = new TextDecoder();
    for await (const piece of child.stderr) {
      stderr += decoder.decode(piece);
      if (stderr.includes("[1]")) break;
    }
    child.kill("SIGKILL");
    await child.exited;
    expect(stderr).toContain("[1]");
    expect(existsSync(output)).toBe(true);
    expect(readImatrix(output).chunkCount).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it("warns of experts no token reached", () => {
    const result = run("-m", moe, "-f", CALIBRATION, "-o", join(directory, "sparse.gguf"), "-c", "12", "--chunks", "1", "--device", "reference");
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/warning: blk\.\d\.ffn_\w+_exps\.weight has partial data: \d of 8 experts were routed to \(the others get importance 1\)/);
  }, 60_000);

  it("fails with one line for bad input", () => {
    const cases: Array<[string[], string]> = [
      [["-m", moe], "missing -f TEXT"],
      [["-f", CALIBRATION], "missing -m MODEL"],
      [["-m", join(directory, "absent.gguf"), "-f", CALIBRATION], `cannot open ${join(directory, "absent.gguf")}: no such file`],
      [["-m", moe, "-f", join(directory, "absent.txt")], `cannot read ${join(directory, "absent.txt")}`],
      [["-m", moe, "-f", CALIBRATION, "-c", "256", "-o", join(directory, "x.gguf"), "--device", "reference"], `${CALIBRATION}: the text tokenizes to 298 tokens; a context of 256 needs at least 512`],
      [["-m", moe, "-f", CALIBRATION, "--chunks", "0"], '--chunks must be a positive integer, got "0"'],
      [["-m", moe, "-f", CALIBRATION, "--kv-type", "q4_0"], '--kv-type must be one of f16, f32, q8_0, got "q4_0"'],
      [["-m", moe, "-f", CALIBRATION, "-o", join(directory, "no", "folder.gguf")], `cannot write ${join(directory, "no", "folder.gguf")}: no folder ${join(directory, "no")}`],
    ];
    for (const [args, message] of cases) {
      const result = run(...args);
      expect(result.code, args.join(" ")).toBe(1);
      expect(result.stderr.split("\n")[0], args.join(" ")).toContain(`memra imatrix: ${message}`);
      // one line, but for a missing argument, which the usage follows
      if (args.includes("-m") && args.includes("-f")) expect(result.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
    }
    expect(existsSync(join(directory, "x.gguf"))).toBe(false);
    const help = run("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: memra imatrix -m MODEL -f TEXT");
  }, 120_000);
});

interface InFileGoldenCase {
  readonly id: string;
  readonly model: string;
  readonly preset: PresetName;
  readonly options: Partial<SyntheticModelOptions>;
  readonly arguments: readonly string[];
  readonly outputs: readonly string[];
  readonly kind: "exact" | "computed" | "statistics";
}

/**
 * Against llama-imatrix's own runs (tools/llamacpp/imatrix-in-file-goldens.ts): combining and
 * rewriting files byte for byte, the statistics text character for character, and what is computed
 * (--from-chunk, on top of --in-file, the --save-frequency copies with their names) with every
 * count, the chunk count and the datasets exact and the sums within the goldens' f32 bound.
 */
describe("memra imatrix --in-file, --output-format, --from-chunk, --save-frequency, --show-statistics against llama-imatrix", () => {
  const ROOT = new URL("../../../../", import.meta.url).pathname;
  const goldens = JSON.parse(readFileSync(new URL("../../../core/src/__fixtures__/imatrix/imatrix-in-file-goldens.json", import.meta.url), "utf8")) as { cases: InFileGoldenCase[] };
  const runAt = (...args: string[]) => {
    const result = Bun.spawnSync(["bun", MAIN, "imatrix", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
  };
  // llama-imatrix's arguments, its -o moved to a folder of our own
  const ours = (c: InFileGoldenCase, folder: string) => {
    const args = [...c.arguments];
    const o = args.indexOf("-o");
    if (o >= 0) args[o + 1] = join(folder, basename(args[o + 1]!));
    return args;
  };

  it("has llama-imatrix's runs to compare with", () => {
    expect(goldens.cases.map((c) => c.kind).sort()).toEqual([...Array(7).fill("exact"), ...Array(3).fill("computed"), ...Array(5).fill("statistics")].sort());
  });

  it.each(goldens.cases.filter((c) => c.kind === "exact").map((c) => [c.id, c] as const))("%s: the same file, byte for byte", async (_id, c) => {
    const folder = mkdtempSync(join(directory, `${c.id}-`));
    const model = await syntheticModelFile(resolveOptions(c.preset, c.options));
    const result = runAt("-m", model, ...ours(c, folder));
    expect(result.code, result.stderr).toBe(0);
    for (const output of c.outputs) expect(Buffer.compare(readFileSync(join(folder, basename(output))), readFileSync(join(ROOT, output))), output).toBe(0);
    expect(readdirSync(folder).sort()).toEqual(c.outputs.map((output) => basename(output)).sort());
  }, 60_000);

  it.each(goldens.cases.filter((c) => c.kind === "statistics").map((c) => [c.id, c] as const))("%s: llama-imatrix's text, character for character", (_id, c) => {
    const result = runAt(...c.arguments);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(readFileSync(join(ROOT, c.outputs[0]!), "utf8"));
  }, 60_000);

  it.each(goldens.cases.filter((c) => c.kind === "computed").map((c) => [c.id, c] as const))("%s: the same files, counts exact, sums within the f32 bound", async (_id, c) => {
    const folder = mkdtempSync(join(directory, `${c.id}-`));
    const model = await syntheticModelFile(resolveOptions(c.preset, c.options));
    const result = runAt("-m", model, ...ours(c, folder), "--kv-type", "f32", "--device", "reference");
    expect(result.code, result.stderr).toBe(0);
    expect(readdirSync(folder).sort()).toEqual(c.outputs.map((output) => basename(output)).sort());
    for (const output of c.outputs) {
      const [mine, theirs] = [readImatrix(join(folder, basename(output))), readImatrix(join(ROOT, output))];
      expect(Object.fromEntries([...mine.entries].map(([name, entry]) => [name, entry.counts])), output).toEqual(Object.fromEntries([...theirs.entries].map(([name, entry]) => [name, entry.counts])));
      expect({ chunkCount: mine.chunkCount, chunkSize: mine.chunkSize, datasets: mine.datasets }, output).toEqual({ chunkCount: theirs.chunkCount, chunkSize: theirs.chunkSize, datasets: theirs.datasets });
      const deviation = imatrixDeviation(mine, theirs);
      expect(deviation.scaled, `${output}: at ${deviation.at}`).toBeLessThanOrEqual(IMATRIX_BOUNDS.f32!);
    }
  }, 120_000);

  it("fails with one line naming the file (and tensor) for an --in-file that is absent, corrupt or of another model, and writes nothing", () => {
    const FIXTURES = join(ROOT, "packages/core/src/__fixtures__/imatrix");
    const corrupt = join(directory, "corrupt.gguf");
    writeFileSync(corrupt, Buffer.concat([readFileSync(join(FIXTURES, "dense-f32-c64.gguf")).subarray(0, 100)]));
    const output = join(directory, "never.gguf");
    const dense = join(FIXTURES, "dense-f32-c64.gguf");
    const gqa = join(FIXTURES, "dense-gqa4-hd128-f32-c64-chunks3.gguf");
    const cases: Array<[string[], string | RegExp]> = [
      [["--in-file", join(directory, "absent.gguf")], `cannot open --in-file ${join(directory, "absent.gguf")}: no such file`],
      [["--in-file", `${dense},${corrupt}`], new RegExp(`^${corrupt}: .* at byte \\d+: `)],
      // two files of models whose attention differs: llama-imatrix's "mismatched sums size"
      [["--in-file", `${dense},${gqa}`], `${gqa}: tensor "blk.0.attn_output.weight": 512 sums, 256 in the files before it: not the model of the files before it`],
      // a file of another model than -m's
      [["-m", moe, "-f", CALIBRATION, "--in-file", gqa], `${gqa}: tensor "blk.0.attn_output.weight": 512 sums, the model's [256, 256] weight takes 256: the imatrix of another model?`],
      [["-m", moe, "--in-file", join(FIXTURES, "moe-f32-c8.gguf"), "--in-file", dense], `${dense}: tensor "blk.0.ffn_down.weight": the model has no such weight: the imatrix of another model?`],
      [["--in-file", dense, "--output-format", "txt"], '--output-format must be one of gguf, dat, got "txt"'],
      [["-m", moe, "-f", CALIBRATION, "-c", "64", "--from-chunk", "3", "--device", "reference"], `${CALIBRATION}: the text tokenizes to 298 tokens; after skipping 3 chunks of 64 fewer than two are left (llama-imatrix wants more than 320)`],
      [["-m", moe, "-f", CALIBRATION, "--save-frequency", "x"], '--save-frequency must be a non-negative integer, got "x"'],
      [["-m", moe, "-f", CALIBRATION, "--output-frequency", "1.5"], '--output-frequency must be a non-negative integer, got "1.5"'],
      [["--show-statistics"], "--show-statistics needs an imatrix file: --in-file FILE"],
      [[], "missing -f TEXT (or --in-file FILE to combine)"],
    ];
    for (const [args, message] of cases) {
      const result = run(...args, "-o", output);
      expect(result.code, args.join(" ")).toBe(1);
      const first = result.stderr.split("\n")[0]!;
      if (typeof message === "string") expect(first, args.join(" ")).toBe(`memra imatrix: ${message}`);
      else expect(first.replace("memra imatrix: ", ""), args.join(" ")).toMatch(message);
      if (args.length > 0) expect(result.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
    }
    expect(existsSync(output)).toBe(false);
  }, 120_000);
});
