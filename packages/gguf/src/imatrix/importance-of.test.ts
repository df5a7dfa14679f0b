/**
 * importanceOf against tools/quantize/quantize.cpp's load_imatrix, transliterated below: GGUF sums
 * divided by each matrix's count (1 for a matrix whose count is 0), legacy sums by ncall (as they are
 * when ncall is not positive), in f32.
 */
import { describe, expect, it } from "vitest";
import type { Imatrix } from "./imatrix";
import { importanceOf } from "./importance-of";
import { readImatrix } from "./read-imatrix";

/** load_imatrix's loop, one statement each, with float arithmetic as C++ does it. */
function loadImatrixLikeQuantize(imatrix: Imatrix): Map<string, Float32Array> {
  const data = new Map<string, Float32Array>();
  for (const [name, entry] of imatrix.entries) {
    const e = new Float32Array(entry.sums.length);
    if (!imatrix.legacy) {
      const ncounts = entry.counts.length;
      const ne0 = entry.sums.length / ncounts;
      for (let j = 0; j < ncounts; j++) {
        const count = Math.fround(entry.counts[j]!);
        if (count > 0) for (let i = 0; i < ne0; i++) e[j * ne0 + i] = Math.fround(entry.sums[j * ne0 + i]! / count);
        else for (let i = 0; i < ne0; i++) e[j * ne0 + i] = 1;
      }
    } else {
      const ncall = entry.counts[0] ?? 0;
      if (ncall > 0) for (let i = 0; i < entry.sums.length; i++) e[i] = Math.fround(entry.sums[i]! / Math.fround(ncall));
      else for (let i = 0; i < entry.sums.length; i++) e[i] = entry.sums[i]!;
    }
    data.set(name, e);
  }
  return data;
}

describe("importanceOf, as llama-quantize normalises an imatrix", () => {
  it("divides each expert's sums by its own count, and gives an expert no token reached 1 everywhere", () => {
    const imatrix: Imatrix = {
      entries: new Map([
        ["blk.0.ffn_up_exps.weight", { sums: Float32Array.of(2, 4, 6, 9, 9, 9, 1, 2, 3), counts: [2, 0, 3] }],
        ["blk.0.attn_q.weight", { sums: Float32Array.of(1, 2, 3), counts: [3] }],
        ["blk.0.attn_k.weight", { sums: Float32Array.of(1, 2), counts: [0] }],
      ]),
      datasets: [],
      chunkCount: 1,
      chunkSize: 3,
      legacy: false,
    };
    const importance = importanceOf(imatrix);
    expect([...importance.get("blk.0.ffn_up_exps.weight")!]).toEqual([1, 2, 3, 1, 1, 1, Math.fround(1 / 3), Math.fround(2 / 3), 1]);
    expect([...importance.get("blk.0.attn_q.weight")!]).toEqual([Math.fround(1 / 3), Math.fround(2 / 3), 1]);
    expect([...importance.get("blk.0.attn_k.weight")!]).toEqual([1, 1]);
    expect(importance).toEqual(loadImatrixLikeQuantize(imatrix));
  });

  it("divides a legacy file's sums by its ncall, leaving them when ncall is 0", () => {
    const imatrix: Imatrix = {
      entries: new Map([
        ["a", { sums: Float32Array.of(3, 6, 7), counts: [3] }],
        ["b", { sums: Float32Array.of(3, 6), counts: [0] }],
      ]),
      datasets: [],
      chunkCount: 3,
      chunkSize: 0,
      legacy: true,
    };
    const importance = importanceOf(imatrix);
    expect([...importance.get("a")!]).toEqual([1, 2, Math.fround(7 / 3)]);
    expect([...importance.get("b")!]).toEqual([3, 6]);
    expect(importance).toEqual(loadImatrixLikeQuantize(imatrix));
  });

  it("is load_imatrix's result on llama-imatrix's files, bit for bit", () => {
    for (const file of ["moe-f32-c64.gguf", "moe-f32-c12-chunks1.gguf", "dense-untied-f32-c74-output.gguf"]) {
      const imatrix = readImatrix(new URL(`../../../core/src/__fixtures__/imatrix/${file}`, import.meta.url).pathname);
      expect(importanceOf(imatrix), file).toEqual(loadImatrixLikeQuantize(imatrix));
    }
    // experts of the 12-token file that no token reached: importance 1 for each of their columns
    const sparse = readImatrix(new URL("../../../core/src/__fixtures__/imatrix/moe-f32-c12-chunks1.gguf", import.meta.url).pathname);
    const [name, entry] = [...sparse.entries].find(([, e]) => e.counts.includes(0))!;
    const expert = entry.counts.indexOf(0);
    expect([...importanceOf(sparse).get(name)!.subarray(expert * 256, (expert + 1) * 256)]).toEqual(new Array(256).fill(1));
  });
});
