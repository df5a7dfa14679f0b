/**
 * Model.embed against llama.cpp's embeddings (tools/llamacpp/embedding-goldens.mjs) of synthetic
 * models set up as embedding models: Qwen3-Embedding's last-token pooling with EOS appended, mean
 * pooling, and a chat model without pooling metadata (the last token's row).
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { loadModel } from "../load-model";
import { cosineSimilarity, loadEmbeddingGoldens } from "../testing/embedding-goldens";
import { InvalidOptionError } from "./generation-options";

const goldens = { models: loadEmbeddingGoldens() };
const cosine = cosineSimilarity;
const maxDifference = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let most = 0;
  for (let i = 0; i < a.length; i++) most = Math.max(most, Math.abs(a[i]! - b[i]!));
  return most;
};
const norm = (a: ArrayLike<number>) => Math.sqrt(Array.from(a).reduce((sum, x) => sum + x * x, 0));

describe("Model.embed against llama.cpp", () => {
  for (const golden of goldens.models) {
    it(`gives llama.cpp's embeddings: ${golden.id}`, async () => {
      const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
      for (const c of golden.cases) {
        const tokens = model.tokenizer.encode(c.text);
        expect(tokens.length, c.text).toBe(c.tokens);
        const raw = model.embed(c.text, { normalize: false });
        expect(raw.length).toBe(c.embedding.length);
        // Bounds, about 3x what was measured: f32 weights agree to float rounding (1 - cosine 4e-8,
        // largest difference 1.1e-4 of the norm, the f16 KV cache's rounding); q8_0 to llama.cpp's
        // 8-bit activations in its dot products (1 - cosine up to 1.5e-4, difference 6e-3).
        const quantized = golden.options.weightType !== "f32";
        expect(1 - cosine(raw, c.embedding), c.text).toBeLessThan(quantized ? 5e-4 : 2e-7);
        expect(maxDifference(raw, c.embedding) / norm(c.embedding), c.text).toBeLessThan(quantized ? 0.02 : 3e-4);
      }
      model.dispose();
    });
  }

  it("normalizes to unit length, truncates to dimensions, pools as asked", async () => {
    const golden = goldens.models.find((m) => m.id === "tiny-q8_0-last-eos")!;
    const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
    expect(model.pooling).toBe("last");
    const text = golden.cases[0]!.text;
    const raw = model.embed(text, { normalize: false });
    const unit = model.embed(text);
    expect(norm(unit)).toBeCloseTo(1, 6);
    expect(maxDifference(unit, Array.from(raw, (x) => x / norm(raw)))).toBeLessThan(1e-6);
    const short = model.embed(text, { dimensions: 16 });
    expect(short.length).toBe(16);
    expect(maxDifference(short, Array.from(raw.subarray(0, 16), (x) => x / norm(raw.subarray(0, 16))))).toBeLessThan(1e-6);
    // Tokens in, the same vector; mean pooling over them differs from the last row.
    const tokens = model.tokenizer.encode(text);
    expect(Array.from(model.embed(tokens))).toEqual(Array.from(unit));
    expect(cosine(model.embed(tokens, { pooling: "mean" }), unit)).toBeLessThan(0.999);
    expect(() => model.embed(text, { dimensions: 65 })).toThrow(InvalidOptionError);
    expect(() => model.embed([])).toThrow(/no tokens/);
    expect(() => model.embed([1, 10_000_000])).toThrow(/outside the vocabulary/);
    model.dispose();
  });

  it("embedAsync runs through the engine beside a generation: embed's vectors, the generation undisturbed", async () => {
    const golden = goldens.models.find((m) => m.id === "tiny-q8_0-last-eos")!;
    const model = loadModel(await syntheticModelFile(resolveOptions(golden.preset, golden.options)));
    const texts = golden.cases.map((c) => c.text);
    const alone = await model.complete("Once upon a time", { temperature: 0, maxTokens: 8 });
    const steps = model.engine.statistics.steps;
    const stream = model.generate("Once upon a time", { temperature: 0, maxTokens: 8 });
    const vectors = Promise.all(texts.map((text) => model.embedAsync(text, { dimensions: 32 })));
    expect((await stream.result).tokens).toEqual(alone.tokens);
    const got = await vectors;
    texts.forEach((text, i) => expect(maxDifference(got[i]!, model.embed(text, { dimensions: 32 })), text).toBeLessThan(1e-6));
    // The texts and the generation shared steps: fewer steps than one per text plus the generation's.
    expect(model.engine.statistics.steps - steps).toBeLessThan(texts.length + 8);
    // Mean pooling through the engine: every row evaluated, beside a generation, also where the
    // text's blocks are in the prefix cache (a text of 3 blocks, embedded twice).
    const long = texts.join(" ").repeat(3);
    const meanSteps = model.engine.statistics.steps;
    const again = model.generate("Once upon a time", { temperature: 0, maxTokens: 8 });
    const means = await Promise.all([long, long, texts[0]!].map((text) => model.embedAsync(text, { pooling: "mean" })));
    expect((await again.result).tokens).toEqual(alone.tokens);
    expect(model.engine.statistics.steps).toBeGreaterThan(meanSteps);
    expect(model.tokenizer.encode(long).length).toBeGreaterThan(48);
    [long, long, texts[0]!].forEach((text, i) => expect(maxDifference(means[i]!, model.embed(text, { pooling: "mean" })), text).toBeLessThan(1e-6));
    expect(maxDifference(await model.embedAsync(long, { pooling: "mean" }), means[0]!)).toBeLessThan(1e-6);
    await expect(model.embedAsync([])).rejects.toThrow(/no tokens/);
    expect(model.engine.pool.usedBlocks).toBe(0);
    model.dispose();
  });

  it("runs between the engine's generations without disturbing them", async () => {
    const model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
    expect(model.pooling).toBe("last");
    const alone = await model.complete("Once upon a time", { temperature: 0, maxTokens: 8 });
    const stream = model.generate("Once upon a time", { temperature: 0, maxTokens: 8 });
    const vectors: Float32Array[] = [];
    for await (const _chunk of stream) vectors.push(model.embed("between steps"));
    expect((await stream.result).tokens).toEqual(alone.tokens);
    for (const vector of vectors) expect(Array.from(vector)).toEqual(Array.from(vectors[0]!));
    model.dispose();
  });
});
