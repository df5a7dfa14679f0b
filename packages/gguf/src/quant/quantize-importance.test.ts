import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GGMLType, ggmlTypeInfo, ggmlTypeName } from "../ggml-type";
import { dequantize } from "./dequantize";
import {
  IMPORTANCE_GOLDEN_ROW_LENGTH,
  IMPORTANCE_GOLDEN_ROWS,
  IMPORTANCE_GOLDEN_TYPES,
  IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES,
  importanceGoldenImportance,
  importanceGoldenInput,
} from "./importance-golden-input";
import { canQuantize, quantize, requiresImportance } from "./quantize";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

interface Golden {
  readonly bytes: number;
  readonly sha256: string;
}

// Recorded by tools/llamacpp/imatrix-quantize-goldens.ts: libggml-base's ggml_quantize_chunk with an importance matrix.
const GOLDENS = JSON.parse(readFileSync(new URL("../__fixtures__/imatrix-quantize-goldens.json", import.meta.url), "utf8")) as {
  rows: number;
  rowLength: number;
  input: string;
  importance: string;
  weighted: Record<string, Golden>;
  unweighted: Record<string, Golden>;
};

describe("quantize with an importance matrix (ggml_quantize_chunk with imatrix)", () => {
  const values = importanceGoldenInput();
  const importance = importanceGoldenImportance();

  it("quantizes the goldens' input", () => {
    expect(GOLDENS.rows).toBe(IMPORTANCE_GOLDEN_ROWS);
    expect(GOLDENS.rowLength).toBe(IMPORTANCE_GOLDEN_ROW_LENGTH);
    expect(sha256(new Uint8Array(values.buffer))).toBe(GOLDENS.input);
    expect(sha256(new Uint8Array(importance.buffer))).toBe(GOLDENS.importance);
    expect(Object.keys(GOLDENS.weighted)).toEqual(IMPORTANCE_GOLDEN_TYPES.map(ggmlTypeName));
  });

  it.each(IMPORTANCE_GOLDEN_TYPES.map((type) => [ggmlTypeName(type), type] as const))("%s: ggml's bytes", (name, type) => {
    const golden = GOLDENS.weighted[name]!;
    const bytes = quantize(type, values, importance);
    expect(bytes.length).toBe(golden.bytes);
    expect(sha256(bytes)).toBe(golden.sha256);
  });

  it.each(IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES.map((type) => [ggmlTypeName(type), type] as const))("%s without importance: ggml's bytes", (name, type) => {
    const golden = GOLDENS.unweighted[name]!;
    const bytes = quantize(type, values);
    expect(bytes.length).toBe(golden.bytes);
    expect(sha256(bytes)).toBe(golden.sha256);
  });

  it("weighs the error: the importance-weighted error is well below that of the unweighted quantization (q8_0 ignores importance)", () => {
    const rows = values.subarray(2 * IMPORTANCE_GOLDEN_ROW_LENGTH); // the rows without edge cases
    const weightedError = (type: GGMLType, bytes: Uint8Array) => {
      const restored = dequantize(type, bytes, rows.length);
      let error = 0;
      for (let i = 0; i < rows.length; i++) error += importance[i % IMPORTANCE_GOLDEN_ROW_LENGTH]! * (restored[i]! - rows[i]!) ** 2;
      return error;
    };
    for (const type of IMPORTANCE_GOLDEN_TYPES) {
      const ratio = weightedError(type, quantize(type, rows, importance)) / weightedError(type, quantize(type, rows));
      if (type === GGMLType.Q8_0) expect(ratio).toBe(1);
      else expect(ratio, ggmlTypeName(type)).toBeLessThan(0.8);
    }
  });

  it("quantizes row by row: the bytes of the rows one at a time", () => {
    const rows = values.subarray(0, 3 * IMPORTANCE_GOLDEN_ROW_LENGTH);
    for (const type of [GGMLType.Q4_0, GGMLType.Q5_1, GGMLType.Q4_K, GGMLType.IQ3_XXS]) {
      const info = ggmlTypeInfo(type)!;
      const rowBytes = (IMPORTANCE_GOLDEN_ROW_LENGTH / info.blockSize) * info.bytesPerBlock;
      const whole = quantize(type, rows, importance);
      for (let row = 0; row < 3; row++) {
        const one = quantize(type, rows.subarray(row * IMPORTANCE_GOLDEN_ROW_LENGTH, (row + 1) * IMPORTANCE_GOLDEN_ROW_LENGTH), importance);
        expect(Buffer.from(one).equals(Buffer.from(whole.subarray(row * rowBytes, (row + 1) * rowBytes)))).toBe(true);
      }
    }
  });

  it("q4_0's weights take their sigma² over the whole row: a row of 4096 is not eight rows of 512", () => {
    const row = values.subarray(4 * IMPORTANCE_GOLDEN_ROW_LENGTH, 5 * IMPORTANCE_GOLDEN_ROW_LENGTH);
    const short = importance.subarray(0, 512);
    const repeated = new Float32Array(IMPORTANCE_GOLDEN_ROW_LENGTH);
    for (let i = 0; i < repeated.length; i += 512) repeated.set(short, i);
    expect(Buffer.from(quantize(GGMLType.Q4_0, row, repeated)).equals(Buffer.from(quantize(GGMLType.Q4_0, row, short)))).toBe(false);
  });

  it("f32, f16, bf16 and q8_0 ignore the importance, as ggml does", () => {
    const rows = values.subarray(0, 2 * IMPORTANCE_GOLDEN_ROW_LENGTH);
    for (const type of [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0]) {
      expect(Buffer.from(quantize(type, rows, importance)).equals(Buffer.from(quantize(type, rows)))).toBe(true);
    }
  });

  it("writes an all-zero iq3_xxs block as zeros, and approximates its input", () => {
    expect(canQuantize(GGMLType.IQ3_XXS)).toBe(true);
    expect(quantize(GGMLType.IQ3_XXS, new Float32Array(256))).toEqual(new Uint8Array(98));
    expect(quantize(GGMLType.IQ3_XXS, new Float32Array(256), new Float32Array(256).fill(1))).toEqual(new Uint8Array(98));
    const rows = values.subarray(2 * IMPORTANCE_GOLDEN_ROW_LENGTH, 4 * IMPORTANCE_GOLDEN_ROW_LENGTH);
    const restored = dequantize(GGMLType.IQ3_XXS, quantize(GGMLType.IQ3_XXS, rows), rows.length);
    let error = 0;
    let energy = 0;
    for (let i = 0; i < rows.length; i++) {
      error += (restored[i]! - rows[i]!) ** 2;
      energy += rows[i]! ** 2;
    }
    expect(error / energy).toBeLessThan(0.1); // 3.06 bits per value, outliers included
  });

  it("rejects lengths that are not whole rows of whole blocks, naming them", () => {
    const row = values.subarray(0, 768);
    expect(() => quantize(GGMLType.Q4_K, row, new Float32Array(512))).toThrow(RangeError);
    expect(() => quantize(GGMLType.Q4_K, row, new Float32Array(512))).toThrow(/768 values are not a whole number of rows of 512/);
    expect(() => quantize(GGMLType.Q4_K, row, new Float32Array(384))).toThrow(/importance has 384 values, not a positive multiple of the q4_K block size 256/);
    expect(() => quantize(GGMLType.Q4_0, row, new Float32Array(0))).toThrow(/importance has 0 values/);
    expect(() => quantize(GGMLType.Q4_0, values.subarray(0, 48), new Float32Array(48))).toThrow(/element count 48 is not a multiple of the q4_0 block size 32/);
  });

  it("knows the types ggml quantizes only with importance", () => {
    expect([GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ1_S].map(requiresImportance)).toEqual([true, true, true]);
    expect([GGMLType.Q4_K, GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ2_S, GGMLType.IQ1_M, GGMLType.F16].map(requiresImportance)).toEqual([false, false, false, false, false, false]);
    // unsupported until its quantizer exists, then "needs an importance matrix": either way it names the type
    expect(() => quantize(GGMLType.IQ2_XXS, new Float32Array(256))).toThrow(/iq2_xxs/);
  });
});
