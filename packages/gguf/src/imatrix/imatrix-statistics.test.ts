/**
 * imatrixStatistics against llama-imatrix --show-statistics (tools/llamacpp/imatrix-in-file-goldens.ts
 * recorded its text for dense, MoE, partly routed, LM-head and legacy files): every row in its order,
 * each number within half a unit of the last digit llama-imatrix printed (plus 1e-6 of the value, for
 * an f32 that lands on the other side of a rounding boundary). The CLI test compares the text itself.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { combineImatrices } from "./combine-imatrices";
import { imatrixStatistics } from "./imatrix-statistics";
import { readImatrix } from "./read-imatrix";

const ROOT = new URL("../../../../", import.meta.url).pathname;
const goldens = JSON.parse(readFileSync(join(ROOT, "packages/core/src/__fixtures__/imatrix/imatrix-in-file-goldens.json"), "utf8")) as {
  cases: Array<{ id: string; arguments: string[]; outputs: string[]; kind: string }>;
};
const cases = goldens.cases.filter((c) => c.kind === "statistics");

/** |ours - printed| may be half a unit of the printed value's last digit, and a millionth of it. */
function within(ours: number, printed: string, scale = 1): boolean {
  const digits = printed.split(".")[1]?.length ?? 0;
  return Math.abs(ours * scale - Number(printed)) <= 0.5 * 10 ** -digits + 1e-6 * Math.abs(Number(printed));
}

describe("imatrixStatistics as llama-imatrix --show-statistics", () => {
  it("has llama-imatrix's statistics of five files", () => {
    expect(cases).toHaveLength(5);
  });

  it.each(cases.map((c) => [c.id, c] as const))("%s: every tensor and layer, in order, within the printed rounding", (_id, c) => {
    const file = c.arguments[c.arguments.indexOf("--in-file") + 1]!;
    const statistics = imatrixStatistics(combineImatrices([{ path: file, imatrix: readImatrix(join(ROOT, file)) }], { chunkSize: 512 }));
    const [tensorPart, layerPart] = readFileSync(join(ROOT, c.outputs[0]!), "utf8").split("Computing weighted average statistics per layer");
    const rows = (text: string) => text.split("\n").filter((line) => /^\s*-?\d*\t|^\s+-\t/.test(line)).map((line) => line.split("\t").map((cell) => cell.trim().replace(/%$/, "")));
    const tensorRows = rows(tensorPart!);
    expect(tensorRows.map((row) => `${row[0]} ${row[1]}`)).toEqual(statistics.tensors.map((t) => `${t.layer} ${t.tensor}`));
    statistics.tensors.forEach((t, i) => {
      const [, , sum, min, max, mean, deviation, active, elements, entropy, entropyPercent, zd, cosine] = tensorRows[i]!;
      const checks: Array<[string, number, string, number?]> = [
        ["sum", t.sum, sum!],
        ["min", t.min, min!],
        ["max", t.max, max!],
        ["mean", t.mean, mean!],
        ["standardDeviation", t.standardDeviation, deviation!],
        ["active", t.active, active!, 100],
        ["entropy", t.entropy, entropy!],
        ["entropyPercent", t.entropyPercent, entropyPercent!],
        ["zd", t.zd, zd!, 100],
        ["cosineSimilarity", t.cosineSimilarity, cosine!],
      ];
      for (const [name, ours, printed, scale] of checks) expect(within(ours, printed, scale), `${t.name} ${name}: ${ours} vs ${printed}`).toBe(true);
      expect(t.elements).toBe(Number(elements));
    });
    const layerRows = rows(layerPart!);
    expect(layerRows.map((row) => Number(row[0]))).toEqual(statistics.layers.map((l) => l.layer));
    statistics.layers.forEach((l, i) => {
      const [, sum, zd, cosine] = layerRows[i]!;
      expect(within(l.sum, sum!) && within(l.zd, zd!, 100) && within(l.cosineSimilarity, cosine!), `layer ${l.layer}: ${JSON.stringify(l)} vs ${layerRows[i]}`).toBe(true);
    });
  });

  it("leaves out tensors no token reached and refuses legacy data as it is", () => {
    const statistics = imatrixStatistics({ entries: new Map([["blk.0.w.weight", { sums: Float32Array.of(1, 2), counts: [0] }]]), datasets: [], chunkCount: 0, chunkSize: 512, legacy: false });
    expect(statistics).toEqual({ tensors: [], layers: [], skipped: ["blk.0.w.weight: every count is zero"] });
    expect(() => imatrixStatistics({ entries: new Map(), datasets: [], chunkCount: 0, chunkSize: 0, legacy: true })).toThrow("legacy imatrix");
  });
});
