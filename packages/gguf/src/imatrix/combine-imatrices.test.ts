/**
 * combineImatrices and encodeLegacyImatrix against llama-imatrix's --in-file runs
 * (tools/llamacpp/imatrix-in-file-goldens.ts): files combined, or rewritten as .dat, come out byte
 * for byte as llama-imatrix writes them; and load_imatrix's rules on sizes, one count against
 * several, legacy scaling, datasets and the chunk count.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { combineImatrices } from "./combine-imatrices";
import type { Imatrix } from "./imatrix";
import { readImatrix } from "./read-imatrix";
import { encodeImatrix } from "./write-imatrix";
import { encodeLegacyImatrix } from "./write-legacy-imatrix";

const ROOT = new URL("../../../../", import.meta.url).pathname;
const goldens = JSON.parse(readFileSync(join(ROOT, "packages/core/src/__fixtures__/imatrix/imatrix-in-file-goldens.json"), "utf8")) as {
  cases: Array<{ id: string; arguments: string[]; outputs: string[]; kind: string }>;
};
const exact = goldens.cases.filter((c) => c.kind === "exact");

describe("combineImatrices as llama-imatrix --in-file", () => {
  it("has llama-imatrix's combined and rewritten files", () => {
    expect(exact.map((c) => c.id)).toEqual(["combine-dense", "combine-moe", "dat-dense", "dat-moe-partial", "combine-dense-dat", "combine-moe-dat", "combine-dense-to-dat"]);
  });

  it.each(exact.map((c) => [c.id, c] as const))("%s: byte for byte", (_id, c) => {
    const option = (name: string) => c.arguments[c.arguments.indexOf(name) + 1];
    const files = option("--in-file")!.split(",");
    const chunkSize = c.arguments.includes("-c") ? Number(option("-c")) : 512;
    const combined = combineImatrices(files.map((path) => ({ path, imatrix: readImatrix(join(ROOT, path)) })), { chunkSize });
    const bytes = c.arguments.includes("dat") ? encodeLegacyImatrix(combined) : encodeImatrix(combined);
    expect(Buffer.compare(Buffer.from(bytes), readFileSync(join(ROOT, c.outputs[0]!)))).toBe(0);
  });

  const gguf = (entries: Array<[string, number[], number[]]>, datasets: string[] = [], chunkSize = 4): Imatrix => ({
    entries: new Map(entries.map(([name, sums, counts]) => [name, { sums: Float32Array.from(sums), counts }])),
    datasets,
    chunkCount: 0,
    chunkSize,
    legacy: false,
  });

  it("adds sums and counts, repeats a single count for every expert, scales legacy data by the chunk size", () => {
    const legacy: Imatrix = { entries: new Map([["e", { sums: Float32Array.of(0.5, 1.5, 2, 4), counts: [3] }]]), datasets: ["old.txt"], chunkCount: 3, chunkSize: 0, legacy: true };
    const experts = gguf([["e", [1, 2, 3, 4], [5, 0]], ["d", [1, 1], [7]]], ["a.txt"]);
    const result = combineImatrices([{ path: "old.dat", imatrix: legacy }, { path: "new.gguf", imatrix: experts }], { chunkSize: 10 });
    // legacy: values × 10, ncall 3 × 10 tokens, then broadcast to the 2 experts
    expect(result.entries.get("e")).toEqual({ sums: Float32Array.of(6, 17, 23, 44), counts: [35, 30] });
    expect(result.entries.get("d")).toEqual({ sums: Float32Array.of(1, 1), counts: [7] });
    expect([...result.entries.keys()]).toEqual(["d", "e"]);
    expect({ datasets: result.datasets, chunkCount: result.chunkCount, chunkSize: result.chunkSize, legacy: result.legacy }).toEqual({ datasets: ["old.txt", "a.txt"], chunkCount: 3, chunkSize: 10, legacy: false });
    // a legacy file after per-expert counts: ncall × chunk size added to each
    expect(combineImatrices([{ path: "new.gguf", imatrix: experts }, { path: "old.dat", imatrix: legacy }], { chunkSize: 10 }).entries.get("e")!.counts).toEqual([35, 30]);
  });

  it("refuses sizes that differ, naming the file and the tensor", () => {
    const a = gguf([["blk.0.w", [1, 2], [1]]]);
    expect(() => combineImatrices([{ path: "a.gguf", imatrix: a }, { path: "b.gguf", imatrix: gguf([["blk.0.w", [1, 2, 3], [1]]]) }], { chunkSize: 4 })).toThrow(
      'b.gguf: tensor "blk.0.w": 3 sums, 2 in the files before it: not the model of the files before it',
    );
    const experts = gguf([["x", [1, 2, 3, 4], [1, 1]]]);
    expect(() => combineImatrices([{ path: "a.gguf", imatrix: experts }, { path: "c.gguf", imatrix: gguf([["x", [1, 2, 3, 4], [1, 1, 1, 1]]]) }], { chunkSize: 4 })).toThrow('c.gguf: tensor "x": 4 counts (experts), 2 in the files before it');
    const legacy: Imatrix = { entries: new Map([["blk.0.w", { sums: Float32Array.of(1), counts: [1] }]]), datasets: [], chunkCount: 1, chunkSize: 0, legacy: true };
    expect(() => combineImatrices([{ path: "a.gguf", imatrix: a }, { path: "d.dat", imatrix: legacy }], { chunkSize: 4 })).toThrow('d.dat: tensor "blk.0.w": 1 values, 2 in the files before it');
    expect(() => combineImatrices([], { chunkSize: 0 })).toThrow("chunkSize must be a positive uint32, got 0");
  });
});
