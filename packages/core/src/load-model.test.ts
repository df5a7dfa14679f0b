import { GGMLType, type GGUFTensorToWrite, ggufValue, openGGUF, readGGUF, writeGGUF } from "@memra/gguf";
import { buildSyntheticModel, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import type { Backend } from "./backend";
import { ModelTensorError, UnsupportedArchitectureError, UnsupportedTensorTypeError } from "./errors";
import { Model, loadModel } from "./load-model";
import { ReferenceBackend } from "./reference-backend";
import { primeGate } from "./testing/prime-gate";

// "The quick brown fox jumps over the lazy dog." in Qwen3 tokens, then a few more.
const PROMPT = [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13, 576, 4226, 1156, 29];

/** A backend that records whether any weight was uploaded (a large allocation). */
function countingBackend(): { backend: Backend; uploads: () => number } {
  const backend = new ReferenceBackend();
  let uploads = 0;
  const upload = backend.uploadWeight.bind(backend);
  backend.uploadWeight = (info, data) => {
    uploads++;
    return upload(info, data);
  };
  return { backend, uploads: () => uploads };
}

function modelWithTensor(name: string, change: (t: GGUFTensorToWrite) => GGUFTensorToWrite) {
  const spec = buildSyntheticModel(resolveOptions("small", { weightType: "f16" }));
  const tensors = (spec.tensors ?? []).map((t) => (t.name === name ? change(t) : t));
  return readGGUF(writeGGUF({ ...spec, tensors }));
}

describe("loadModel", () => {
  it("prefill and token-by-token decode agree (prime gate), dense and MoE, in one chunk and in several", async () => {
    for (const [preset, overrides] of [
      ["small", { weightType: "q8_0" }],
      ["tiny-moe", { weightType: "f16" }],
    ] as const) {
      const path = await syntheticModelFile(resolveOptions(preset, overrides));
      for (const maxBatchTokens of [512, 5]) {
        const model = loadModel(path, { maxBatchTokens });
        const result = primeGate(model, PROMPT, 0.01);
        expect(result.argmaxMismatches, `${preset} batch ${maxBatchTokens}`).toEqual([]);
        expect(result.maxAbsoluteDifference, `${preset} batch ${maxBatchTokens}`).toBeLessThan(1e-3);
        model.dispose();
      }
    }
  });

  it("computes the same logits from a file mapped in windows as from one mapped whole", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
    const whole = Model.create(openGGUF(path));
    // 32 KiB windows (13 for its 24 tensors, the 10 MB embedding alone in one) and a header mapping grown from 4 KiB.
    const windowedFile = openGGUF(path, { windowBytes: 2 ** 15, headerBytes: 4096 });
    expect(windowedFile.header.byteLength).toBeLessThan(windowedFile.fileBytes);
    const windowed = Model.create(windowedFile);
    const tokens = PROMPT.slice(0, 6);
    const expected = whole.forward(tokens, whole.createCache(tokens.length), { logits: "all" });
    const got = windowed.forward(tokens, windowed.createCache(tokens.length), { logits: "all" });
    expect(got.length).toBe(tokens.length * whole.vocabularySize);
    expect(Buffer.compare(new Uint8Array(got.buffer, got.byteOffset, got.byteLength), new Uint8Array(expected.buffer, expected.byteOffset, expected.byteLength))).toBe(0);
    whole.dispose();
    windowed.dispose();
  });

  it("reports config and memory figures", async () => {
    const model = loadModel(await syntheticModelFile(resolveOptions("tiny-moe", { weightType: "q8_0" })));
    expect(model.config).toMatchObject({ architecture: "qwen3moe", blockCount: 2, expertCount: 8, expertUsedCount: 2 });
    expect(model.vocabularySize).toBe(151936);
    // 2 layers × (K and V) × 2 KV heads × head_dim 16 × 2 bytes (f16, the default KV type)
    expect(model.memory.kvBytesPerToken).toBe(2 * 2 * 2 * 16 * 2);
    expect(model.memory.kvType).toBe("f16");
    expect(model.memory.weightBytes).toBeGreaterThan(151936 * 64 * 4);
    expect(model.memory.fileBytes).toBeGreaterThan(0);
  });

  it("rejects another architecture before loading any weight", () => {
    const spec = buildSyntheticModel(resolveOptions("tiny", {}));
    const metadata = new Map(spec.metadata as Map<string, ReturnType<typeof ggufValue.string>>);
    metadata.set("general.architecture", ggufValue.string("llama"));
    const { backend, uploads } = countingBackend();
    expect(() => Model.create(readGGUF(writeGGUF({ metadata, tensors: [] })), { backend })).toThrow(UnsupportedArchitectureError);
    expect(() => Model.create(readGGUF(writeGGUF({ metadata, tensors: [] })), { backend })).toThrow(/unsupported architecture "llama" \(supported: qwen3, qwen3moe\)/);
    expect(uploads()).toBe(0);
  });

  it("rejects a tensor type it cannot compute with, naming the tensor, before loading any weight", () => {
    const file = modelWithTensor("blk.1.attn_q.weight", (t) => ({ ...t, type: GGMLType.TQ1_0, data: new Uint8Array(256 * 54) }));
    const { backend, uploads } = countingBackend();
    expect(() => Model.create(file, { backend })).toThrow(UnsupportedTensorTypeError);
    expect(() => Model.create(file, { backend })).toThrow(/tensor "blk\.1\.attn_q\.weight" has type tq1_0/);
    expect(uploads()).toBe(0);
  });

  it("rejects a missing or misshapen tensor, naming it", () => {
    const misshapen = modelWithTensor("blk.0.ffn_up.weight", (t) => ({ ...t, shape: [256, 256], data: new Uint8Array(256 * 256 * 2) }));
    expect(() => Model.create(misshapen)).toThrow(ModelTensorError);
    expect(() => Model.create(misshapen)).toThrow(/tensor "blk\.0\.ffn_up\.weight": shape \[256, 256\], expected \[256, 512\]/);
    const missing = modelWithTensor("output_norm.weight", (t) => ({ ...t, name: "something_else.weight" }));
    expect(() => Model.create(missing)).toThrow(/tensor "output_norm\.weight": missing from the file/);
  });

  it("rejects token ids outside the vocabulary and logits rows outside the input", async () => {
    const model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
    expect(() => model.forward([151936], model.createCache(8))).toThrow(/token id 151936 at position 0 is outside the vocabulary/);
    expect(() => model.forward([1, 2], model.createCache(8), { logits: [2] })).toThrow(/logits requested for row 2 of 2/);
    expect(() => model.forward([1, 2, 3], model.createCache(2))).toThrow(/KV cache full: 3 tokens needed, capacity 2/);
  });
});
