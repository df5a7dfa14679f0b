import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GGMLType } from "../ggml-type";
import { dequantize } from "./dequantize";
import { iqQuantizeGoldenInput } from "./iq-golden-input";
import { canQuantize, quantize } from "./quantize";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

// Recorded by tools/llamacpp/iq-goldens.ts: libggml-base's ggml_quantize_chunk without an importance matrix.
const GOLDENS = JSON.parse(readFileSync(new URL("../__fixtures__/iq-quantize-goldens.json", import.meta.url), "utf8")) as {
  quantized: Record<string, { values: number; input: string; blocks: string }>;
};

describe("iq3_s quantization", () => {
  const input = iqQuantizeGoldenInput();

  it("gives ggml's bytes", () => {
    const golden = GOLDENS.quantized.iq3_s!;
    expect(input.length).toBe(golden.values);
    expect(sha256(new Uint8Array(input.buffer))).toBe(golden.input);
    expect(canQuantize(GGMLType.IQ3_S)).toBe(true);
    expect(sha256(quantize(GGMLType.IQ3_S, input))).toBe(golden.blocks);
  });

  it("approximates its input (3.4 bits per value)", () => {
    const values = input.subarray(2048, 2048 + 64 * 256); // plain bell-shaped super-blocks
    const restored = dequantize(GGMLType.IQ3_S, quantize(GGMLType.IQ3_S, values), values.length);
    let error = 0;
    let energy = 0;
    for (let i = 0; i < values.length; i++) {
      error += (restored[i]! - values[i]!) ** 2;
      energy += values[i]! ** 2;
    }
    expect(error / energy).toBeLessThan(0.05);
  });

  it("writes an all-zero block as zeros", () => {
    expect(quantize(GGMLType.IQ3_S, new Float32Array(256))).toEqual(new Uint8Array(110));
  });
});
