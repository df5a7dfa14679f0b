/**
 * computeImatrix on the reference backend against llama-imatrix's files (the golden cases of
 * conformance/imatrix-golden.ts), and its chunking and input checks.
 */
import { parseMetadataOverride } from "@memra/gguf";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { computeImatrix } from "./compute-imatrix";
import { defineImatrixGoldenSuite } from "./conformance/imatrix-golden";
import { ReferenceBackend } from "./reference-backend";

defineImatrixGoldenSuite({ name: "reference", create: () => new ReferenceBackend() });

describe("computeImatrix", () => {
  let tiny = "";
  beforeAll(async () => {
    tiny = await syntheticModelFile(resolveOptions("tiny", { weightType: "f32" }));
  }, 120_000);
  const tokens = Array.from({ length: 100 }, (_, i) => 1000 + ((i * 7919) % 5000));

  it("replaces each chunk's first token by BOS where the vocabulary adds BOS", () => {
    const bos = 151643; // <|endoftext|>, the synthetic vocabulary's BOS
    const addBos = { metadataOverrides: [parseMetadataOverride("tokenizer.ggml.add_bos_token=bool:true")] };
    const replaced = tokens.map((token, i) => (i % 16 === 0 ? bos : token));
    const options = { contextSize: 16, chunks: 3, kvType: "f32" as const };
    const withBos = computeImatrix(tiny, tokens, { ...options, ...addBos });
    expect(withBos).toEqual(computeImatrix(tiny, replaced, options));
    expect(withBos).not.toEqual(computeImatrix(tiny, tokens, options));
  });

  it("counts every token of the chunks it evaluates: --chunks, whole chunks only", () => {
    const all = computeImatrix(tiny, tokens, { contextSize: 16 }); // 6 whole chunks of 16; 4 tokens left over
    expect(all.entries.get("blk.0.attn_q.weight")!.counts).toEqual([96]);
    expect({ chunkCount: all.chunkCount, chunkSize: all.chunkSize, datasets: all.datasets }).toEqual({ chunkCount: 6, chunkSize: 16, datasets: [] });
    const two = computeImatrix(tiny, tokens, { contextSize: 16, chunks: 2, dataset: "text.txt" });
    expect(two.entries.get("blk.1.ffn_down.weight")!.counts).toEqual([32]);
    expect({ chunkCount: two.chunkCount, datasets: two.datasets }).toEqual({ chunkCount: 2, datasets: ["text.txt"] });
  });

  it("skips firstChunk chunks, adds to initial data (its datasets first) and calls onSave as the chunk count passes multiples of saveFrequency", () => {
    const skipped = computeImatrix(tiny, tokens, { contextSize: 16, firstChunk: 2, kvType: "f32" });
    expect(skipped).toEqual(computeImatrix(tiny, tokens.slice(32), { contextSize: 16, kvType: "f32" }));
    const initial = computeImatrix(tiny, tokens, { contextSize: 16, chunks: 3, dataset: "a.txt" });
    const saves: Array<[number, number[]]> = [];
    const continued = computeImatrix(tiny, tokens, {
      contextSize: 16,
      batchSize: 16,
      chunks: 2,
      dataset: "b.txt",
      initial,
      saveFrequency: 2,
      onSave: (imatrix, chunk) => saves.push([chunk, [imatrix.chunkCount, imatrix.entries.get("blk.0.attn_q.weight")!.counts[0]!, imatrix.entries.get("blk.0.attn_k.weight")!.counts[0]!]]),
    });
    expect(continued.entries.get("blk.1.ffn_down.weight")!.counts).toEqual([80]);
    expect({ chunkCount: continued.chunkCount, datasets: continued.datasets }).toEqual({ chunkCount: 5, datasets: ["a.txt", "b.txt"] });
    // 3 chunks loaded, one chunk a step: chunk 4 passes 4 as attn_q (the step's first weight) is added to, before attn_k
    expect(saves).toEqual([[4, [4, 64, 48]]]);
  });

  it("calls onOutput every outputFrequency chunks, before onSave and with the same data (llama-imatrix's --output-frequency)", () => {
    const events: Array<[string, number, number]> = [];
    const outputs = new Map<number, unknown>();
    const copies = new Map<number, unknown>();
    const final = computeImatrix(tiny, tokens, {
      contextSize: 16,
      batchSize: 16,
      kvType: "f32",
      outputFrequency: 2,
      onOutput: (imatrix, chunk) => {
        events.push(["output", chunk, imatrix.chunkCount]);
        outputs.set(chunk, imatrix);
      },
      saveFrequency: 1,
      onSave: (imatrix, chunk) => {
        events.push(["save", chunk, imatrix.chunkCount]);
        copies.set(chunk, imatrix);
      },
    });
    // 100 tokens, chunks of 16: 6 chunks, one a step
    expect(final.chunkCount).toBe(6);
    expect(events).toEqual([
      ["save", 1, 1],
      ["output", 2, 2],
      ["save", 2, 2],
      ["save", 3, 3],
      ["output", 4, 4],
      ["save", 4, 4],
      ["save", 5, 5],
      ["output", 6, 6],
      ["save", 6, 6],
    ]);
    for (const chunk of [2, 4, 6]) expect(outputs.get(chunk)).toEqual(copies.get(chunk));
    expect(() => computeImatrix(tiny, tokens, { outputFrequency: 1.5 })).toThrow("outputFrequency must be a non-negative integer, got 1.5");
  });

  it("refuses a text of fewer than two chunks' tokens and options out of range", () => {
    expect(() => computeImatrix(tiny, tokens.slice(0, 31), { contextSize: 16 })).toThrow("the text tokenizes to 31 tokens; a context of 16 needs at least 32");
    expect(() => computeImatrix(tiny, tokens, { contextSize: 0 })).toThrow("contextSize must be a positive integer, got 0");
    expect(() => computeImatrix(tiny, tokens, { chunks: 1.5 })).toThrow("chunks must be a positive integer, got 1.5");
    expect(() => computeImatrix(tiny, tokens, { contextSize: 16, firstChunk: 5 })).toThrow("the text tokenizes to 100 tokens; after skipping 5 chunks of 16 fewer than two are left (llama-imatrix wants more than 112)");
    expect(() => computeImatrix(tiny, tokens, { saveFrequency: -1 })).toThrow("saveFrequency must be a non-negative integer, got -1");
    expect(() => computeImatrix(tiny, tokens, { contextSize: 4 })).toThrow("a context of 4 packs 512 chunks into a batch of 2048; llama.cpp allows at most 256 sequences");
  });
});
