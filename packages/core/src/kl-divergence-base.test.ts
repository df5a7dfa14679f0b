/**
 * llama-perplexity's --kl-divergence-base files and its strided perplexity against the real tool:
 * __fixtures__/kld-base/ (tools/llamacpp/kld-base-goldens.ts) holds llama-perplexity's base file of a
 * synthetic f32 model (vocabulary of 1,023, 3 windows of 128 tokens) and what it printed: the
 * saving run's perplexity, --kl-divergence on that file for the base, Q8_0 and Q4_K_M (remade here
 * with @memra/gguf's quantizeModel, which writes llama-quantize's files byte for byte),
 * --ppl-output-type 1 and --ppl-stride. Reference backend, f32 KV cache (the golden suite's settings).
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { quantizeModel } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import goldens from "./__fixtures__/kld-base/kld-base-goldens.json";
import { computeKlDivergence, computePerplexity } from "./evaluation";
import { KL_DIVERGENCE_BASE_HEADER_BYTES, computeKlDivergenceFromBase, klDivergenceBaseRowLength, openKlDivergenceBase, saveKlDivergenceBase } from "./kl-divergence-base";
import { type Model, loadModel } from "./load-model";
import { computeStridedPerplexity } from "./strided-perplexity";

const LLAMA_FILE = new URL("./__fixtures__/kld-base/base.kld", import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), "memra-kld-base-"));
const paths: Record<string, string> = {};
let base: Model;
let tokens: number[];

beforeAll(async () => {
  const options = goldens.base as { preset: PresetName; options: Partial<SyntheticModelOptions> };
  paths.F32 = await syntheticModelFile(resolveOptions(options.preset, options.options));
  for (const type of goldens.types) {
    paths[type] = join(directory, `${type}.gguf`);
    await quantizeModel(paths.F32, paths[type]!, { type });
  }
  base = loadModel(paths.F32, { kvType: "f32" });
  tokens = base.tokenizer.encode(readFileSync(new URL(`../../../${goldens.text}`, import.meta.url), "utf8"), { special: false });
}, 120_000);

/** "label: 1.5 ± 0.2" lines of llama-perplexity's report → label (spaces collapsed) → its numbers. */
function parseReport(report: string): Map<string, number[]> {
  const figures = new Map<string, number[]>();
  for (const line of report.split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) figures.set(line.slice(0, colon).trim().replace(/\s+/g, " "), [...line.slice(colon + 1).matchAll(/-?\d+\.\d+/g)].map((m) => Number(m[0])));
  }
  return figures;
}

/** "[1]x,[2]y," → [x, y]; type-1 lines → their columns. */
const perplexityList = (text: string) => [...text.matchAll(/\[\d+\](\d+\.\d+)/g)].map((m) => Number(m[1]));
const columns = (text: string) => text.trim().split("\n").map((line) => line.trim().split(/\s+/).map(Number));

describe("saveKlDivergenceBase writes llama-perplexity's file", () => {
  it("header and tokens byte for byte, scales to float rounding, the 16-bit log-probabilities within 1 of llama.cpp's", () => {
    const path = join(directory, "memra.kld");
    const result = saveKlDivergenceBase(base, tokens, goldens.context, path, { chunks: goldens.chunks });
    perplexityList(goldens.save.perplexity).forEach((expected, i) => expect(Math.abs(result.perWindow[i]! / expected - 1), `window ${i + 1}`).toBeLessThan(1e-6));
    const ours = readFileSync(path);
    const theirs = readFileSync(LLAMA_FILE);
    expect(ours.length).toBe(theirs.length);
    const dataStart = KL_DIVERGENCE_BASE_HEADER_BYTES + 4 * goldens.context * goldens.chunks;
    expect(ours.subarray(0, dataStart).equals(theirs.subarray(0, dataStart))).toBe(true);
    const rowLength = klDivergenceBaseRowLength(1023);
    expect(rowLength).toBe(1028); // 1,023 values, one padding value, two floats
    const u16 = (b: Buffer) => new Uint16Array(b.buffer.slice(b.byteOffset + dataStart, b.byteOffset + b.length));
    const [a, b] = [u16(ours), u16(theirs)];
    const [fa, fb] = [new Float32Array(a.buffer), new Float32Array(b.buffer)];
    let differing = 0;
    let largest = 0;
    let largestScale = 0;
    const rows = a.length / rowLength;
    for (let r = 0; r < rows; r++) {
      for (const k of [0, 1]) largestScale = Math.max(largestScale, Math.abs(fa[(r * rowLength) / 2 + k]! / fb[(r * rowLength) / 2 + k]! - 1));
      for (let i = 4; i < 4 + 1023; i++) {
        const d = Math.abs(a[r * rowLength + i]! - b[r * rowLength + i]!);
        if (d > 0) differing++;
        largest = Math.max(largest, d);
      }
      expect(a[r * rowLength + 1027], "padding").toBe(0);
      expect(b[r * rowLength + 1027], "llama.cpp's padding").toBe(0);
    }
    // Measured: 1,096 of 193,347 values (0.57%) differ, each by 1 (logits apart by float rounding
    // landing on either side of a rounding point); scale and min_log_prob within 2.2e-7.
    expect(largest).toBeLessThanOrEqual(1);
    expect(differing / (rows * 1023)).toBeLessThan(0.01);
    expect(largestScale).toBeLessThan(1e-6);
  });
});

// Bounds on llama.cpp's printed figures (which carry 6 decimals, Δp and same top p 3 decimals of a
// percent): the base's perplexity comes from the file alone; the model's figures differ by its
// forward pass (llama.cpp quantizes activations to 8 bits for quantized weights, the reference
// backend does not). Measured: F32 PPL(Q) 3.9e-8 relative, KLD 2.3e-7; Q8_0 PPL(Q) 1.7e-3, mean KLD
// 0.6%, max KLD 2.6%, RMS Δp 2.2%, one top token of 189; Q4_K_M PPL(Q) 3.2e-4, mean KLD 0.2%, max KLD
// 6.4%, RMS Δp 6.0%, same top equal.
const READ_BOUNDS: Record<string, { ppl: number; meanKld: number; maxKld: number; rmsDeltaP: number; sameTop: number }> = {
  F32: { ppl: 1e-6, meanKld: 1e-6, maxKld: 1e-6, rmsDeltaP: 6e-4, sameTop: 1e-3 },
  Q8_0: { ppl: 4e-3, meanKld: 2e-4, maxKld: 5e-4, rmsDeltaP: 4e-3, sameTop: 1.1 },
  Q4_K_M: { ppl: 1e-3, meanKld: 1e-3, maxKld: 8e-2, rmsDeltaP: 8e-2, sameTop: 1.1 },
};

describe("computeKlDivergenceFromBase reading llama-perplexity's file", () => {
  it.each(goldens.cases.map((c) => [c.type, c] as const))("%s: llama-perplexity --kl-divergence's statistics", (type, c) => {
    using file = openKlDivergenceBase(LLAMA_FILE);
    expect([file.context, file.vocabularySize, file.chunks]).toEqual([goldens.context, 1023, goldens.chunks]);
    expect(Array.from(file.tokens)).toEqual(tokens.slice(0, goldens.context * goldens.chunks));
    const result = computeKlDivergenceFromBase(loadModel(paths[type]!, { kvType: "f32" }), file);
    expect(result.scoredTokens).toBe(goldens.chunks * (goldens.context - 1 - goldens.context / 2));
    const llama = parseReport(c.report);
    const bound = READ_BOUNDS[type]!;
    const [pplBase, pplBaseError] = llama.get("Mean PPL(base)")!;
    expect(Math.abs(result.perplexity.base / pplBase! - 1)).toBeLessThan(1e-6);
    expect(Math.abs(result.perplexity.baseUncertainty / pplBaseError! - 1)).toBeLessThan(1e-6);
    expect(Math.abs(result.perplexity.model / llama.get("Mean PPL(Q)")![0]! - 1)).toBeLessThan(bound.ppl);
    expect(Math.abs(result.klDivergence.mean - llama.get("Mean KLD")![0]!)).toBeLessThan(bound.meanKld);
    expect(Math.abs(result.klDivergence.maximum - llama.get("Maximum KLD")![0]!)).toBeLessThan(bound.maxKld);
    expect(Math.abs(100 * result.deltaP.rms - llama.get("RMS Δp")![0]!)).toBeLessThan(100 * bound.rmsDeltaP * Math.max(1e-2, result.deltaP.rms) + 6e-4);
    expect(Math.abs(100 * result.sameTop.fraction - llama.get("Same top p")![0]!)).toBeLessThan(bound.sameTop);
    expect(Math.abs(100 * result.perplexity.correlation - llama.get("Cor(ln(PPL(Q)), ln(PPL(base)))")![0]!)).toBeLessThan(type === "F32" ? 6e-3 : 3e-2);
  });
});

describe("one run and two runs agree", () => {
  it("computeKlDivergence from full logits and computeKlDivergenceFromBase from memra's file differ by the 16-bit rounding only", () => {
    const path = join(directory, "agree.kld");
    saveKlDivergenceBase(base, tokens, goldens.context, path, { chunks: goldens.chunks, batchSize: 50 });
    using file = openKlDivergenceBase(path);
    const step = 16 / 65535; // the largest scale: logits within 16 of the top over 65,535 steps
    for (const type of ["F32", "Q4_K_M"]) {
      const model = loadModel(paths[type]!, { kvType: "f32" });
      const one = computeKlDivergence(base, model, tokens, goldens.context, { chunks: goldens.chunks });
      const two = computeKlDivergenceFromBase(model, file);
      let clipped = 0;
      for (let i = 0; i < one.scoredTokens; i++) {
        // the same model forward: equal −ln p
        expect(two.perToken.nllModel[i]).toBe(one.perToken.nllModel[i]);
        const saved = two.perToken.nllBase[i]!;
        const exact = one.perToken.nllBase[i]!;
        // a next token more than 16 below the top logit is saved at the floor (llama.cpp's format)
        if (saved < exact - step) clipped++;
        else expect(Math.abs(saved - exact), `token ${i}: base −ln p`).toBeLessThanOrEqual(step / 2 + 1e-6);
        // measured: 5.3e-5 (rounding of every ln p, and the tokens below −16 left out)
        expect(Math.abs(two.perToken.klDivergence[i]! - one.perToken.klDivergence[i]!), `token ${i}: KLD`).toBeLessThan(1e-4);
        expect(Math.abs(two.perToken.deltaP[i]! - one.perToken.deltaP[i]!), `token ${i}: Δp`).toBeLessThan(1e-5);
        expect(two.perToken.sameTop[i], `token ${i}: same top`).toBe(one.perToken.sameTop[i]);
      }
      expect(clipped).toBe(17); // this random model puts 17 of 189 next tokens that low
    }
  });
});

describe("llama-perplexity's other options", () => {
  it("--ppl-stride: windows of ctx + stride/2, stride apart, scoring their last stride predictions", () => {
    const s = goldens.strided;
    const result = computeStridedPerplexity(base, tokens, s.context, s.stride, { chunks: s.chunks, batchSize: s.batch });
    expect(result.context).toBe(s.window);
    expect(result.scoredTokens).toBe(s.chunks * s.stride);
    const expected = perplexityList(s.perplexity);
    expect(result.perWindow).toHaveLength(expected.length);
    // measured 3e-8
    expected.forEach((p, i) => expect(Math.abs(result.perWindow[i]! / p - 1), `window ${i + 1}`).toBeLessThan(1e-6));
    columns(s.outputType1).forEach(([offset], i) => expect(offset).toBe(i * s.stride));
    expect(() => computeStridedPerplexity(base, tokens.slice(0, 500), s.context, s.stride)).toThrow(/needs at least 512 tokens for a window of 256/);
    expect(() => computeStridedPerplexity(base, tokens, 8, 20)).toThrow(/a stride of 20 scores more predictions than a window of 18/);
  });

  it("--ppl-output-type 1's columns, --chunks and -b", () => {
    const result = computePerplexity(base, tokens, goldens.context, { chunks: goldens.chunks, batchSize: goldens.context });
    const rows = columns(goldens.outputType1);
    expect(result.windows).toBe(rows.length);
    rows.forEach(([offset, ppl, mean, stderr], i) => {
      expect(offset).toBe(i * goldens.context);
      expect(Math.abs(result.perWindow[i]! / ppl! - 1)).toBeLessThan(1e-6);
      expect(Math.abs(result.perWindowNll[i]!.mean - mean!)).toBeLessThan(2e-6);
      expect(Math.abs(result.perWindowNll[i]!.stderr - stderr!)).toBeLessThan(2e-6);
    });
    const stepped = computePerplexity(base, tokens, goldens.context, { chunks: goldens.chunks, batchSize: 50 });
    expect(Math.abs(stepped.perplexity / result.perplexity - 1)).toBeLessThan(1e-9);
  });
});

describe("openKlDivergenceBase refuses what is not a whole file, naming it and the problem", () => {
  const llama = () => readFileSync(LLAMA_FILE);
  const write = (name: string, bytes: Uint8Array) => {
    const path = join(directory, name);
    writeFileSync(path, bytes);
    return path;
  };
  it.each([
    ["short.kld", () => llama().subarray(0, 12), /short\.kld: 12 bytes, shorter than the 20-byte header/],
    ["magic.kld", () => Buffer.concat([Buffer.from("_logitz_"), llama().subarray(8)]), /magic\.kld: does not start with "_logits_"/],
    ["truncated.kld", () => llama().subarray(0, 300_000), /truncated\.kld: truncated: 300000 bytes, its header \(n_ctx 128, n_vocab 1023, n_chunk 3\) calls for 390140/],
    ["longer.kld", () => Buffer.concat([llama(), Buffer.alloc(2)]), /longer\.kld: 2 bytes after the last chunk/],
    [
      "huge.kld",
      () => {
        const b = Buffer.from(llama().subarray(0, 4096));
        b.writeInt32LE(0x7fffffff, 16);
        return b;
      },
      /huge\.kld: truncated: 4096 bytes, its header \(n_ctx 128, n_vocab 1023, n_chunk 2147483647\)/,
    ],
    [
      "context.kld",
      () => {
        const b = Buffer.from(llama());
        b.writeInt32LE(-5, 8);
        return b;
      },
      /context\.kld: n_ctx \(offset 8\) is -5/,
    ],
    [
      "token.kld",
      () => {
        const b = Buffer.from(llama());
        b.writeInt32LE(1023, 20 + 4 * 7);
        return b;
      },
      /token\.kld: token 7 \(offset 48\) is 1023, outside the vocabulary of 1023/,
    ],
  ] as const)("%s", (name, bytes, message) => {
    expect(() => openKlDivergenceBase(write(name, bytes()))).toThrow(message);
  });

  it("a file for another vocabulary, a missing file, and one that shrinks after opening", () => {
    using file = openKlDivergenceBase(LLAMA_FILE);
    const other = { vocabularySize: 151936 } as Model;
    expect(() => computeKlDivergenceFromBase(other, file)).toThrow(/base\.kld was saved from a model with 1023 tokens in its vocabulary, this one has 151936/);
    expect(() => openKlDivergenceBase(join(directory, "absent.kld"))).toThrow(/cannot open .*absent\.kld/);
    const path = write("shrinks.kld", llama());
    using shrinking = openKlDivergenceBase(path);
    writeFileSync(path, llama().subarray(0, 200_000));
    expect(() => shrinking.readChunk(2)).toThrow(/shrinks\.kld: chunk 2 ends early/);
  });
});
