/**
 * RoPE scaling parameters as llama.cpp resolves them (the GGUF's rope.scaling keys, overridden by
 * the caller's; type none turns scaling off), and the refusal of a backend without ropeNeoxScaled.
 * That the scaled rotation matches llama.cpp is the golden suite's dense-yarn-f32 and
 * dense-linear-q8_0 (recorded with llama.cpp on synthetic models carrying those keys).
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import { UnsupportedOpError } from "../errors";
import { InvalidOptionError } from "../generation/generation-options";
import { loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { resolveRopeScaling, scaledContextLength } from "./rope-scaling";

const qwen3 = { contextLength: 40960, ropeFreqBase: 1_000_000 };

describe("resolveRopeScaling", () => {
  it("reads the GGUF's scaling and lets the caller's options take precedence, as llama.cpp's context parameters do", () => {
    expect(resolveRopeScaling(qwen3, 128)).toBeUndefined();
    const file = { ...qwen3, ropeScalingType: "yarn" as const, ropeScalingFactor: 4, ropeScalingOriginalContextLength: 32768 };
    const yarn = resolveRopeScaling(file, 128)!;
    expect(yarn).toMatchObject({ freqScale: 0.25, extFactor: 1 });
    expect(yarn.magnitude).toBeCloseTo(1 + 0.1 * Math.log(4), 6);
    // ggml_rope_yarn_corr_dims: the pairs whose wavelengths fit 32 and 1 times into 32768 tokens.
    const dim = (rotations: number) => (128 * Math.log(32768 / (rotations * 2 * Math.PI))) / (2 * Math.log(1e6));
    expect([yarn.low, yarn.high]).toEqual([Math.floor(dim(32)), Math.ceil(dim(1))]);
    // The original context defaults to the context length; a larger one moves the ramp to faster pairs.
    expect(resolveRopeScaling({ ...file, ropeScalingOriginalContextLength: undefined }, 128)!.high).toBeGreaterThan(yarn.high);
    expect(resolveRopeScaling(file, 128, { type: "none" })).toBeUndefined();
    expect(resolveRopeScaling(file, 128, { type: "linear" })).toEqual({ freqScale: 0.25, extFactor: 0, magnitude: 1, low: 0, high: 0 });
    expect(resolveRopeScaling(file, 128, { type: "yarn", factor: 2 })!.freqScale).toBe(0.5);
    expect(resolveRopeScaling(qwen3, 128, { type: "yarn", factor: 4, originalContextLength: 32768 })).toEqual(yarn);
    expect(resolveRopeScaling({ ...qwen3, ropeScalingType: "linear" }, 128)).toBeUndefined(); // factor 1
  });

  it("the context a scaled model holds: factor × the original context, never less than the file's", async () => {
    const file = { ...qwen3, ropeScalingType: "yarn" as const, ropeScalingFactor: 4, ropeScalingOriginalContextLength: 32768 };
    expect(scaledContextLength(qwen3, 128)).toBe(40960);
    expect(scaledContextLength(file, 128)).toBe(131072);
    expect(scaledContextLength(file, 128, { type: "none" })).toBe(40960);
    expect(scaledContextLength(qwen3, 128, { type: "linear", factor: 2 })).toBe(81920); // the file's 40960 as the original
    expect(scaledContextLength({ ...qwen3, contextLength: 262144 }, 128, { type: "yarn", factor: 2, originalContextLength: 32768 })).toBe(262144);

    // A model's own sequences (generate, embed, caches) reach it: the tiny file holds 4096 tokens.
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", contextLength: 64 }));
    const plain = loadModel(path, { kvCacheTokens: 256 });
    const scaled = loadModel(path, { kvCacheTokens: 256, ropeScaling: { type: "yarn", factor: 4 } });
    try {
      expect(plain.contextLength).toBe(64);
      expect(scaled.contextLength).toBe(256);
      const prompt = Array.from({ length: 100 }, (_, i) => 1000 + i);
      await expect(plain.complete(prompt, { maxTokens: 4 })).rejects.toThrow(/exceeds the context of 64 tokens/);
      expect((await scaled.complete(prompt, { temperature: 0, maxTokens: 4 })).tokens).toHaveLength(4);
      expect(() => plain.embed(prompt)).toThrow(/the model's context holds 64/);
      expect(scaled.embed(prompt)).toHaveLength(64);
      expect(scaled.createCache().capacity).toBe(256);
    } finally {
      plain.dispose();
      scaled.dispose();
    }
  });

  it("a model with scaling refuses a backend without ropeNeoxScaled, naming it; bad options are errors", async () => {
    const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "f32", ropeScaling: { type: "yarn", factor: 4, originalContextLength: 64 } }));
    const lacking = Object.assign(new ReferenceBackend(), { ropeNeoxScaled: undefined, name: "no-yarn" });
    expect(() => loadModel(path, { backend: lacking })).toThrow(UnsupportedOpError);
    expect(() => loadModel(path, { backend: lacking })).toThrow(/the no-yarn backend has no ropeNeoxScaled, which the model's RoPE scaling \(YaRN, factor 4\) needs/);
    // Without scaling (turned off), the same backend runs it.
    loadModel(path, { backend: lacking, ropeScaling: { type: "none" } }).dispose();
    expect(() => loadModel(path, { ropeScaling: { type: "yarn", factor: -1 } })).toThrow(InvalidOptionError);
  });
});
