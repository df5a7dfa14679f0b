import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { canDequantize, dequantize } from "./dequantize";
import { IQ_GOLDEN_BLOCKS, IQ_GOLDEN_TYPES, iqGoldenInput } from "./iq-golden-input";
import * as grids from "./iq-grids";
import { canMakeRandomBlocks, randomBlocks, setBlockScale } from "./random-blocks";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

// Recorded by tools/llamacpp/iq-goldens.ts from ggml's own to_float (libggml-base).
const GOLDENS = JSON.parse(readFileSync(new URL("../__fixtures__/iq-dequantize-goldens.json", import.meta.url), "utf8")) as {
  goldens: Record<string, { blocks: number; input: string; values: string }>;
};

describe("i-quant dequantization is ggml's, bit for bit", () => {
  for (const type of IQ_GOLDEN_TYPES) {
    const name = ggmlTypeInfo(type)!.name;
    it(name, () => {
      const golden = GOLDENS.goldens[name]!;
      expect(golden.blocks).toBe(IQ_GOLDEN_BLOCKS);
      const input = iqGoldenInput(type);
      expect(sha256(input)).toBe(golden.input);
      const values = dequantize(type, input, IQ_GOLDEN_BLOCKS * ggmlTypeInfo(type)!.blockSize);
      expect(sha256(new Uint8Array(values.buffer))).toBe(golden.values);
    });
  }
});

describe("i-quant grids", () => {
  // native/common/iq-grids.h and iq-grids.ts are written by one script; this catches an edit to one.
  const header = readFileSync(new URL("../../../../native/common/iq-grids.h", import.meta.url), "utf8");
  const cTable = (name: string, bytesPerEntry: number): Uint8Array => {
    const start = header.indexOf(`memra_${name}[`);
    const body = header.slice(header.indexOf("{", start) + 1, header.indexOf("};", start));
    const words = body.split(",").map((s) => s.trim()).filter((s) => s.length > 0).map((s) => BigInt(s));
    const out = new Uint8Array(words.length * bytesPerEntry);
    words.forEach((word, i) => {
      for (let b = 0; b < bytesPerEntry; b++) out[i * bytesPerEntry + b] = Number((word >> BigInt(8 * b)) & 0xffn);
    });
    return out;
  };
  const tables: [string, Uint8Array, number, number][] = [
    ["ksigns_iq2xs", grids.KSIGNS_IQ2XS, 1, 128],
    ["iq2xxs_grid", grids.IQ2XXS_GRID, 8, 256],
    ["iq2xs_grid", grids.IQ2XS_GRID, 8, 512],
    ["iq2s_grid", grids.IQ2S_GRID, 8, 1024],
    ["iq3xxs_grid", grids.IQ3XXS_GRID, 4, 256],
    ["iq3s_grid", grids.IQ3S_GRID, 4, 512],
    ["iq1s_grid", new Uint8Array(grids.IQ1S_GRID.buffer), 8, 2048],
  ];
  for (const [name, table, bytesPerEntry, entries] of tables) {
    it(`${name}: the C and TypeScript copies agree`, () => {
      expect(table.length).toBe(bytesPerEntry * entries);
      expect(cTable(name, bytesPerEntry)).toEqual(table);
    });
  }
  it("the sign table makes the count of negatives even", () => {
    for (let i = 0; i < 128; i++) {
      const signs = grids.KSIGNS_IQ2XS[i]!;
      expect(signs & 127).toBe(i);
      let bits = 0;
      for (let j = 0; j < 8; j++) bits += (signs >> j) & 1;
      expect(bits % 2).toBe(0);
    }
  });
});

describe("randomBlocks", () => {
  it("makes blocks of the requested RMS, deterministically", () => {
    for (const type of IQ_GOLDEN_TYPES) {
      expect(canMakeRandomBlocks(type)).toBe(true);
      const count = 64 * 256;
      const bytes = randomBlocks(type, count, 7, 0.05);
      expect(bytes).toEqual(randomBlocks(type, count, 7, 0.05));
      expect(bytes).not.toEqual(randomBlocks(type, count, 8, 0.05));
      const values = dequantize(type, bytes, count);
      const rms = Math.sqrt(values.reduce((sum, v) => sum + v * v, 0) / count);
      expect(rms, ggmlTypeInfo(type)!.name).toBeGreaterThan(0.05 * 0.8);
      expect(rms, ggmlTypeInfo(type)!.name).toBeLessThan(0.05 * 1.25);
    }
  });
  it("refuses types it cannot make and partial blocks", () => {
    expect(canMakeRandomBlocks(GGMLType.Q4_K)).toBe(false);
    expect(() => randomBlocks(GGMLType.Q4_K, 256, 1)).toThrow(/no random blocks of q4_K/);
    expect(() => randomBlocks(GGMLType.IQ2_XXS, 100, 1)).toThrow(/not a whole number of iq2_xxs blocks/);
  });
  it("iq1_m's scale lives in the top nibbles of its four scales", () => {
    const bytes = randomBlocks(GGMLType.IQ1_M, 256, 3);
    const before = bytes.slice();
    setBlockScale(GGMLType.IQ1_M, bytes, 0, 0x3c00); // 1.0
    for (let i = 0; i < 56; i++) {
      if (i >= 48 && i % 2 === 1) expect(bytes[i]! & 0x0f).toBe(before[i]! & 0x0f);
      else expect(bytes[i]).toBe(before[i]);
    }
    expect([49, 51, 53, 55].map((i) => bytes[i]! >> 4)).toEqual([0x0, 0x0, 0xc, 0x3]);
  });
  it("every i-quant type dequantizes", () => {
    for (const type of IQ_GOLDEN_TYPES) expect(canDequantize(type)).toBe(true);
  });
});
