/**
 * writeImatrix against llama-imatrix's save_imatrix: its files (packages/core/src/__fixtures__/imatrix,
 * recorded by tools/llamacpp/imatrix-goldens.ts) read and written again come out byte for byte (the
 * same keys in the same order, tensor names, shapes, order, offsets and padding), and what is written
 * reads back as it was.
 */
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GGMLType } from "../ggml-type";
import { readGGUF } from "../read-gguf";
import type { Imatrix } from "./imatrix";
import { readImatrix } from "./read-imatrix";
import { encodeImatrix, writeImatrix } from "./write-imatrix";

const GOLDENS = new URL("../../../core/src/__fixtures__/imatrix/", import.meta.url).pathname;
const goldenFiles = readdirSync(GOLDENS).filter((file) => file.endsWith(".gguf"));
const directory = mkdtempSync(join(tmpdir(), "memra-imatrix-write-"));

describe("writeImatrix writes llama-imatrix's GGUF layout", () => {
  it("has llama.cpp's files to compare with", () => {
    expect(goldenFiles.length).toBeGreaterThanOrEqual(5);
  });

  it.each(goldenFiles)("%s read and written again is the same file, byte for byte", (file) => {
    const original = readFileSync(join(GOLDENS, file));
    const written = encodeImatrix(readImatrix(join(GOLDENS, file)));
    // the layout first, for a readable failure: keys, then tensors with their shapes
    const [ours, theirs] = [readGGUF(written), readGGUF(original)];
    expect([...ours.metadata.keys()]).toEqual([...theirs.metadata.keys()]);
    expect(ours.tensors.map((t) => `${t.name} ${t.type} [${t.shape.join(", ")}] @${t.offset}`)).toEqual(theirs.tensors.map((t) => `${t.name} ${t.type} [${t.shape.join(", ")}] @${t.offset}`));
    expect(Buffer.compare(Buffer.from(written), original)).toBe(0);
  });

  it("writes keys in save_imatrix's order with its types, and dense [columns] / [1], experts [columns, n] / [1, n]", () => {
    const imatrix: Imatrix = {
      entries: new Map([
        ["blk.0.ffn_up_exps.weight", { sums: Float32Array.from({ length: 12 }, (_, i) => i), counts: [2, 0, 5] }],
        ["blk.0.attn_q.weight", { sums: Float32Array.of(1, 2, 3, 4), counts: [7] }],
      ]),
      datasets: ["a.txt", "ünïcode.txt"],
      chunkCount: 3,
      chunkSize: 512,
      legacy: false,
    };
    const file = readGGUF(encodeImatrix(imatrix));
    expect([...file.metadata.entries()]).toEqual([
      ["general.type", { type: "string", value: "imatrix" }],
      ["imatrix.datasets", { type: "array", itemType: "string", items: ["a.txt", "ünïcode.txt"] }],
      ["imatrix.chunk_count", { type: "uint32", value: 3 }],
      ["imatrix.chunk_size", { type: "uint32", value: 512 }],
    ]);
    expect(file.tensors.map((t) => [t.name, t.type, t.shape])).toEqual([
      ["blk.0.attn_q.weight.in_sum2", GGMLType.F32, [4]],
      ["blk.0.attn_q.weight.counts", GGMLType.F32, [1]],
      ["blk.0.ffn_up_exps.weight.in_sum2", GGMLType.F32, [4, 3]],
      ["blk.0.ffn_up_exps.weight.counts", GGMLType.F32, [1, 3]],
    ]);
  });

  it("round-trips through a file: entries, counts (zeros included), datasets, chunk count and size", () => {
    const imatrix: Imatrix = {
      entries: new Map([
        ["blk.0.attn_q.weight", { sums: Float32Array.of(0.25, 1e-30, 3e10, 0), counts: [123456] }],
        ["blk.3.ffn_down_exps.weight", { sums: Float32Array.from({ length: 16 }, (_, i) => Math.fround(i / 7)), counts: [0, 4, 9, 0] }],
        ["output.weight", { sums: Float32Array.of(5, 6), counts: [1] }],
      ]),
      datasets: ["calibration.txt"],
      chunkCount: 241,
      chunkSize: 512,
      legacy: false,
    };
    const path = join(directory, "round-trip.gguf");
    writeImatrix(path, imatrix);
    const read = readImatrix(path);
    expect(read).toEqual(imatrix);
    expect(readdirSync(directory).filter((name) => name.includes("partial"))).toEqual([]);
  });

  it("refuses what it cannot write: a legacy imatrix, sums that do not divide into the matrices, bad counts", () => {
    const base: Imatrix = { entries: new Map(), datasets: [], chunkCount: 0, chunkSize: 512, legacy: false };
    expect(() => encodeImatrix({ ...base, legacy: true })).toThrow(/legacy imatrix/);
    expect(() => encodeImatrix({ ...base, entries: new Map([["w", { sums: new Float32Array(5), counts: [1, 1] }]]) })).toThrow('imatrix entry "w": 5 sums do not divide into 2 matrices');
    expect(() => encodeImatrix({ ...base, entries: new Map([["w", { sums: new Float32Array(2), counts: [1.5] }]]) })).toThrow("count 1.5 is not a non-negative integer");
    expect(() => encodeImatrix({ ...base, chunkSize: -1 })).toThrow("imatrix.chunk_size must be a uint32");
  });
});
