/**
 * encodeLegacyImatrix as llama-imatrix's save_imatrix_legacy (its files are compared byte for byte
 * in combine-imatrices.test.ts): the layout, ncall rounded up, unrouted experts and empty entries.
 */
import { describe, expect, it } from "vitest";
import type { Imatrix } from "./imatrix";
import { parseImatrix } from "./read-imatrix";
import { encodeLegacyImatrix } from "./write-legacy-imatrix";

describe("encodeLegacyImatrix", () => {
  const imatrix: Imatrix = {
    entries: new Map([
      ["b", { sums: Float32Array.of(10, 20, 30, 40), counts: [5, 0] }],
      ["a", { sums: Float32Array.of(3), counts: [12] }],
      ["empty", { sums: Float32Array.of(9), counts: [0] }],
    ]),
    datasets: ["first.txt", "last.txt"],
    chunkCount: 2,
    chunkSize: 8,
    legacy: false,
  };

  it("writes entries by name with ncall = ceil(largest count / chunk size) and sum / count × ncall; 1 × ncall for an unrouted expert; no empty entry", () => {
    const bytes = encodeLegacyImatrix(imatrix);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect(view.getInt32(0, true)).toBe(2); // "empty" left out
    const read = parseImatrix(bytes);
    expect(read.legacy).toBe(true);
    expect([...read.entries.keys()]).toEqual(["a", "b"]);
    expect(read.entries.get("a")).toEqual({ sums: Float32Array.of(Math.fround(3 / 12) * 2), counts: [2] });
    expect(read.entries.get("b")).toEqual({ sums: Float32Array.of(2, 4, 1, 1), counts: [1] });
    expect({ chunkCount: read.chunkCount, datasets: read.datasets }).toEqual({ chunkCount: 2, datasets: ["last.txt"] });
    // layout: count, then "a": length 1, "a", ncall 2, nval 1, one float
    expect([...bytes.subarray(4, 21)]).toEqual([1, 0, 0, 0, 97, 2, 0, 0, 0, 1, 0, 0, 0, ...new Uint8Array(Float32Array.of(0.5).buffer)]);
  });

  it("writes an empty dataset name when there is none, and refuses legacy data and a chunk size of 0", () => {
    const bytes = encodeLegacyImatrix({ ...imatrix, datasets: [] });
    expect([...bytes.subarray(-8)]).toEqual([2, 0, 0, 0, 0, 0, 0, 0]);
    expect(() => encodeLegacyImatrix({ ...imatrix, legacy: true })).toThrow("already legacy data");
    expect(() => encodeLegacyImatrix({ ...imatrix, chunkSize: 0 })).toThrow("the legacy format needs a chunk size of 1 to 2^31 - 1 tokens, got 0");
  });
});
