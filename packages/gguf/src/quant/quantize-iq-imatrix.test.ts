import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { dequantize } from "./dequantize";
import { IQ_IMATRIX_GOLDEN_TYPES, IQ_IMATRIX_OPTIONAL_TYPES, iqImatrixGoldenInput } from "./iq-golden-input";
import { canQuantize, quantize, requiresImportance } from "./quantize";
import { quantizeIQ1_M, quantizeIQ1_S } from "./quantize-iq1";
import { quantizeIQ2_S, quantizeIQ2_XS, quantizeIQ2_XXS } from "./quantize-iq2";
import { seededNormalValues, seededUniform } from "./seeded-random";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

// Recorded by tools/llamacpp/iq-imatrix-goldens.ts: libggml-base's ggml_quantize_chunk with an importance matrix (and without, for iq2_s and iq1_m).
const GOLDENS = JSON.parse(readFileSync(new URL("../__fixtures__/iq-imatrix-quantize-goldens.json", import.meta.url), "utf8")) as {
  rows: number;
  rowLength: number;
  input: string;
  importance: string;
  quantized: Record<string, { blocks: string; blocksWithoutImportance?: string }>;
};

type Quantizer = (x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array) => void;

const QUANTIZERS = new Map<GGMLType, Quantizer>([
  [GGMLType.IQ2_XXS, quantizeIQ2_XXS as Quantizer],
  [GGMLType.IQ2_XS, quantizeIQ2_XS as Quantizer],
  [GGMLType.IQ2_S, quantizeIQ2_S],
  [GGMLType.IQ1_S, quantizeIQ1_S as Quantizer],
  [GGMLType.IQ1_M, quantizeIQ1_M],
]);

function run(type: GGMLType, values: Float32Array, rowLength: number, importance?: Float32Array): Uint8Array {
  const info = ggmlTypeInfo(type)!;
  const out = new Uint8Array((values.length / info.blockSize) * info.bytesPerBlock);
  QUANTIZERS.get(type)!(values, out, values.length / rowLength, rowLength, importance);
  return out;
}

/** Σ w·(x̂ − x)² / Σ w·x², w the importance of the value's column. */
function weightedError(type: GGMLType, values: Float32Array, bytes: Uint8Array, importance: Float32Array): number {
  const restored = dequantize(type, bytes, values.length);
  let error = 0;
  let energy = 0;
  for (let i = 0; i < values.length; i++) {
    const w = importance[i % importance.length]!;
    error += w * (restored[i]! - values[i]!) ** 2;
    energy += w * values[i]! ** 2;
  }
  return error / energy;
}

describe("i-quant quantization with an importance matrix", () => {
  const input = iqImatrixGoldenInput();

  it("quantizes ggml's input", () => {
    expect(input.values.length).toBe(GOLDENS.rows * GOLDENS.rowLength);
    expect(input.rowLength).toBe(GOLDENS.rowLength);
    expect(sha256(new Uint8Array(input.values.buffer, input.values.byteOffset, input.values.byteLength))).toBe(GOLDENS.input);
    expect(sha256(new Uint8Array(input.importance.buffer))).toBe(GOLDENS.importance);
  });

  it.each(IQ_IMATRIX_GOLDEN_TYPES.map((type) => [ggmlTypeInfo(type)!.name, type] as const))("%s gives ggml's bytes (quantize)", (name, type) => {
    const golden = GOLDENS.quantized[name]!;
    expect(canQuantize(type)).toBe(true);
    expect(sha256(quantize(type, input.values, input.importance))).toBe(golden.blocks);
    if (IQ_IMATRIX_OPTIONAL_TYPES.includes(type)) {
      expect(requiresImportance(type)).toBe(false);
      expect(sha256(quantize(type, input.values))).toBe(golden.blocksWithoutImportance);
    } else {
      expect(requiresImportance(type)).toBe(true);
      expect(golden.blocksWithoutImportance).toBeUndefined();
      expect(() => quantize(type, input.values)).toThrow(new RegExp(`${name} needs an importance matrix`));
    }
  });

  // bell-shaped rows and an importance of 2^-4 .. 2^3: the fit favours the important columns
  const rowLength = 1024;
  const values = seededNormalValues(4 * rowLength, 7);
  const uniform = seededUniform(8);
  const importance = new Float32Array(rowLength).map(() => 2 ** (Math.floor(uniform() * 8) - 4));
  const flat = new Float32Array(rowLength).fill(1);
  const bounds: [GGMLType, number][] = [
    [GGMLType.IQ2_XXS, 0.08],
    [GGMLType.IQ2_XS, 0.065],
    [GGMLType.IQ2_S, 0.055],
    [GGMLType.IQ1_S, 0.2],
    [GGMLType.IQ1_M, 0.15],
  ];
  it.each(bounds.map(([type, bound]) => [ggmlTypeInfo(type)!.name, type, bound] as const))("%s approximates its input, the important columns best", (_name, type, bound) => {
    const weighted = weightedError(type, values, run(type, values, rowLength, importance), importance);
    expect(weighted).toBeLessThan(bound);
    expect(weighted).toBeLessThan(weightedError(type, values, run(type, values, rowLength, flat), importance));
  });

  it.each([...QUANTIZERS.keys()].map((type) => [ggmlTypeInfo(type)!.name, type] as const))("%s writes an all-zero block as zeros", (_name, type) => {
    const info = ggmlTypeInfo(type)!;
    expect(run(type, new Float32Array(256), 256, new Float32Array(256).fill(1))).toEqual(new Uint8Array(info.bytesPerBlock));
  });

  it("checks the shapes it is given", () => {
    const x = new Float32Array(512);
    expect(() => quantizeIQ2_XXS(x, new Uint8Array(132), 2, 256, new Float32Array(255))).toThrow(/importance has 255 values, a row 256/);
    expect(() => quantizeIQ2_XS(x, new Uint8Array(148), 1, 500, new Float32Array(500))).toThrow(/row length 500/);
    expect(() => quantizeIQ1_S(x, new Uint8Array(99), 2, 256, new Float32Array(256))).toThrow(/out has 99 bytes, 2 blocks need 100/);
    expect(() => quantizeIQ1_M(x, new Uint8Array(168), 3, 256)).toThrow(/3 rows of 256 values need 768 values, have 512/);
    expect(() => quantizeIQ1_S(x, new Uint8Array(100), 2, 256)).toThrow(/quantizeIQ1_S: needs an importance matrix/);
  });
});
