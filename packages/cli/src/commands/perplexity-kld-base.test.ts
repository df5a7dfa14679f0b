/**
 * `memra perplexity --kl-divergence-base` (both runs), --ppl-stride, --ppl-output-type, -b and
 * --chunks against llama-perplexity's output (packages/core/src/__fixtures__/kld-base/, recorded by
 * tools/llamacpp/kld-base-goldens.ts; the library's figures are bounded in core's
 * kl-divergence-base.test.ts). Reference backend, f32 KV cache, as the goldens.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { quantizeModel } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import goldens from "../../../core/src/__fixtures__/kld-base/kld-base-goldens.json";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const LLAMA_FILE = new URL("../../../core/src/__fixtures__/kld-base/base.kld", import.meta.url).pathname;
const TEXT = new URL(`../../../../${goldens.text}`, import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-cli-kld-base-"));
const SETTINGS = ["--device", "reference", "--kv-type", "f32"];
let basePath = "";
let quantized = "";

function run(args: string[]) {
  const result = Bun.spawnSync(["bun", MAIN, "perplexity", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

beforeAll(async () => {
  const options = goldens.base as { preset: PresetName; options: Partial<SyntheticModelOptions> };
  basePath = await syntheticModelFile(resolveOptions(options.preset, options.options));
  quantized = join(directory, "Q4_K_M.gguf");
  await quantizeModel(basePath, quantized, { type: "Q4_K_M" });
}, 120_000);

/** The numbers of each line, and each line with its numbers blanked (the layout). */
const numbers = (line: string) => [...line.matchAll(/-?\d+\.\d+/g)].map((m) => Number(m[0]));
const layout = (text: string) => text.replace(/-?\d+\.\d+/g, "#").replace(/ +/g, " ");

describe("memra perplexity --kl-divergence-base FILE --kl-divergence", () => {
  it("reads llama-perplexity's file and prints its report, line for line", () => {
    const result = run(["-m", quantized, "--kl-divergence-base", LLAMA_FILE, "--kl-divergence", ...SETTINGS]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const [summary, ...rest] = result.stdout.split("\n");
    expect(summary).toMatch(/^384 tokens, 3 windows of 128, 189 tokens scored/);
    const ours = `${rest.join("\n").trim()}\n`;
    const theirs = goldens.cases.find((c) => c.type === "Q4_K_M")!.report;
    expect(layout(ours)).toBe(layout(theirs));
    // the base's perplexity is the file's: equal to the printed digits but the last
    const ourLines = ours.split("\n");
    const theirLines = theirs.split("\n");
    const baseLine = ourLines.findIndex((line) => line.startsWith("Mean PPL(base)"));
    numbers(ourLines[baseLine]!).forEach((x, i) => expect(Math.abs(x - numbers(theirLines[baseLine]!)[i]!)).toBeLessThan(0.01));
    // same top p of each window: equal (the KL divergence and PPL(Q) are bounded in core)
    ourLines.slice(1, 4).forEach((line, i) => expect(numbers(line).slice(-2)).toEqual(numbers(theirLines[i + 1]!).slice(-2)));
    const json = JSON.parse(run(["-m", quantized, "--kl-divergence-base", LLAMA_FILE, "--kl-divergence", "--json", ...SETTINGS]).stdout);
    expect(json.perToken).toBeUndefined();
    expect(json.scoredTokens).toBe(189);
    expect(json.perplexity.base).toBeCloseTo(numbers(theirLines[baseLine]!)[0]!, 2);
  });

  it("fails in one line naming the file: truncated, another vocabulary, missing flag combinations", async () => {
    const truncated = join(directory, "cut.kld");
    writeFileSync(truncated, readFileSync(LLAMA_FILE).subarray(0, 5000));
    const cut = run(["-m", quantized, "--kl-divergence-base", truncated, "--kl-divergence", ...SETTINGS]);
    expect(cut.code).toBe(1);
    expect(cut.stderr).toBe(`memra perplexity: ${truncated}: truncated: 5000 bytes, its header (n_ctx 128, n_vocab 1023, n_chunk 3) calls for 390140\n`);
    const full = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
    const other = run(["-m", full, "--kl-divergence-base", LLAMA_FILE, "--kl-divergence", ...SETTINGS]);
    expect(other.stderr).toMatch(/base\.kld was saved from a model with 1023 tokens in its vocabulary, the model has 151936: they cannot be compared\n$/);
    expect(run(["-m", quantized, "--kl-divergence", "-f", TEXT]).stderr).toMatch(/--kl-divergence without a value compares with a saved base/);
    expect(run(["-m", quantized, "--kl-divergence-base", LLAMA_FILE, "--ppl-stride", "8", "-f", TEXT]).stderr).toMatch(/--ppl-stride computes a strided perplexity only/);
  });
});

describe("memra perplexity -m BASE -f TEXT --kl-divergence-base FILE", () => {
  it("writes llama-perplexity's header and tokens and prints the perplexity as it goes", () => {
    const path = join(directory, "saved.kld");
    const result = run(["-m", basePath, "-f", TEXT, "-c", String(goldens.context), "--chunks", String(goldens.chunks), "--kl-divergence-base", path, "-b", "100", ...SETTINGS]);
    expect(result.stderr).toBe("");
    const [, list, estimate] = result.stdout.split("\n");
    const expected = numbers(goldens.save.perplexity);
    numbers(list!).forEach((x, i) => expect(Math.abs(x / expected[i]! - 1)).toBeLessThan(1e-6));
    // llama.cpp: "Final estimate: PPL = 156731.4134 +/- 40332.89258"
    const [ppl, error] = numbers(goldens.save.finalEstimate!);
    const [ourPpl, ourError] = numbers(estimate!);
    expect(Math.abs(ourPpl! / ppl! - 1)).toBeLessThan(1e-6);
    expect(Math.abs(ourError! / error! - 1)).toBeLessThan(1e-6);
    const ours = readFileSync(path);
    const theirs = readFileSync(LLAMA_FILE);
    expect(ours.length).toBe(theirs.length);
    expect(ours.subarray(0, 20 + 4 * 384).equals(theirs.subarray(0, 20 + 4 * 384))).toBe(true);
  });
});

describe("memra perplexity --ppl-output-type, --ppl-stride, --chunks, -b", () => {
  it("--ppl-output-type 1: a line per window as llama-perplexity prints it", () => {
    const result = run(["-m", basePath, "-f", TEXT, "-c", String(goldens.context), "--chunks", String(goldens.chunks), "--ppl-output-type", "1", ...SETTINGS]);
    const lines = result.stdout.split("\n").slice(1, 1 + goldens.chunks);
    const expected = goldens.outputType1.split("\n").filter(Boolean);
    expect(lines.map(layout)).toEqual(expected.map(layout));
    const columns = (line: string) => line.trim().split(/\s+/).map(Number);
    lines.forEach((line, i) => {
      const [offset, ppl, mean, stderr] = columns(line);
      const [o, p, m, s] = columns(expected[i]!);
      expect(offset).toBe(o);
      expect(Math.abs(ppl! / p! - 1)).toBeLessThan(1e-6);
      expect(Math.abs(mean! - m!)).toBeLessThan(2e-6);
      expect(Math.abs(stderr! - s!)).toBeLessThan(2e-6);
    });
  });

  it("--ppl-stride N with both output types", () => {
    const s = goldens.strided;
    const args = ["-m", basePath, "-f", TEXT, "-c", String(s.context), "--ppl-stride", String(s.stride), "-b", String(s.batch), "--chunks", String(s.chunks), ...SETTINGS];
    const plain = run(args);
    expect(plain.stderr).toBe("");
    expect(plain.stdout.split("\n")[0]).toMatch(/6 windows of 256 \(--ctx 192 \+ 128 \/ 2, as llama-perplexity\) starting 128 apart$/);
    const expected = numbers(s.perplexity);
    const ours = numbers(plain.stdout.split("\n")[1]!);
    expect(ours).toHaveLength(expected.length);
    ours.forEach((x, i) => expect(Math.abs(x / expected[i]! - 1)).toBeLessThan(1e-6));
    const lines = run([...args, "--ppl-output-type", "1"]).stdout.split("\n").slice(1, 1 + s.chunks);
    expect(lines.map(layout)).toEqual(s.outputType1.split("\n").filter(Boolean).map(layout));
    lines.forEach((line, i) => expect(line.slice(0, 8)).toBe(s.outputType1.split("\n")[i]!.slice(0, 8)));
  });

  it("takes llama-perplexity's command line: -ngl, -fa on, -ctk/-ctv, sampling flags (with a notice), --ctx-size, --batch-size", () => {
    const s = goldens.strided;
    const own = run(["-m", basePath, "-f", TEXT, "-c", String(s.context), "--ppl-stride", String(s.stride), "-b", String(s.batch), "--chunks", "2", ...SETTINGS]);
    const llama = run(["-m", basePath, "-f", TEXT, "--ctx-size", String(s.context), "--ppl-stride", String(s.stride), "--batch-size", String(s.batch), "--chunks", "2", "--device", "reference", "-ngl", "99", "-fa", "on", "-ctk", "f32", "-ctv", "f32", "--temp", "0.7"]);
    expect(llama.code).toBe(0);
    expect(llama.stdout.split("\n").slice(0, 2)).toEqual(own.stdout.split("\n").slice(0, 2));
    expect(llama.stderr).toMatch(/^memra: llama\.cpp flags that change nothing here: -ngl 99 \(memra's scoring commands run on one backend.*\); --temp 0\.7 \(it scores the text and generates nothing\)\n$/);
    expect(run(["-m", basePath, "-f", TEXT, "--lora", "x.gguf"]).stderr).toContain("llama.cpp's --lora is not supported by memra: memra's scoring commands load no LoRA adapter");
  });

  it("--ppl-stride N: the window is llama-perplexity's context, --ctx + N/2 rounded up to a multiple of 256", () => {
    const s = goldens.stridedSized;
    const args = ["-m", basePath, "-f", TEXT, "-c", String(s.context), "--ppl-stride", String(s.stride), "-b", String(s.batch), "--chunks", String(s.chunks), ...SETTINGS];
    const plain = run(args);
    expect(plain.stderr).toBe("");
    expect(plain.stdout.split("\n")[0]).toMatch(new RegExp(`${s.chunks} windows of ${s.window} \\(--ctx 100 \\+ 40 / 2, rounded up to a multiple of 256, as llama-perplexity\\) starting 40 apart$`));
    const expected = numbers(s.perplexity);
    const ours = numbers(plain.stdout.split("\n")[1]!);
    expect(ours).toHaveLength(expected.length);
    ours.forEach((x, i) => expect(Math.abs(x / expected[i]! - 1)).toBeLessThan(1e-6));
  });
});
