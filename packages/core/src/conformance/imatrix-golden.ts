/**
 * computeImatrix against llama-imatrix: the cases of __fixtures__/imatrix/imatrix-goldens.json
 * (recorded by tools/llamacpp/imatrix-goldens.ts from llama.cpp's own imatrix.cpp on golden-suite
 * models and a committed calibration text), run on any backend. The tensor names, every count
 * (per expert included), the chunk count and size must be llama.cpp's exactly; the sums agree up
 * to float rounding of the activations (the backends' kernels sum in other orders than ggml's).
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { type Imatrix, readImatrix } from "@memra/gguf";
import { type PresetName, type SyntheticModelOptions, resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import type { Backend } from "../backend";
import { computeImatrix } from "../compute-imatrix";

const FIXTURES = new URL("../__fixtures__/imatrix/", import.meta.url);

export interface ImatrixGoldenCase {
  readonly id: string;
  readonly model: string;
  readonly preset: PresetName;
  readonly options: Partial<SyntheticModelOptions>;
  readonly modelFile: string;
  readonly file: string;
  readonly contextSize: number;
  readonly chunks?: number;
  readonly processOutput?: boolean;
  readonly note: string;
  readonly llamaImatrix: { readonly chunks: number; readonly perplexity: number };
}

export interface ImatrixGoldens {
  /** The calibration text's path relative to the repository root (as llama-imatrix recorded it in imatrix.datasets). */
  readonly calibration: string;
  readonly cases: readonly ImatrixGoldenCase[];
}

export function loadImatrixGoldens(): ImatrixGoldens {
  return JSON.parse(readFileSync(new URL("imatrix-goldens.json", FIXTURES), "utf8")) as ImatrixGoldens;
}

/** The path of a golden case's llama-imatrix file. */
export function imatrixGoldenPath(c: ImatrixGoldenCase): string {
  return new URL(c.file, FIXTURES).pathname;
}

/** The calibration text as llama-imatrix's -f reads it: the file, one trailing newline dropped. */
export function imatrixCalibrationText(): string {
  const text = readFileSync(new URL("calibration.txt", FIXTURES), "utf8");
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

export interface ImatrixDeviation {
  /** Largest |ours − reference| / |reference| over every sum. */
  readonly relative: number;
  /**
   * Largest |ours − reference| / (|reference| + mean |reference| of its matrix): relative for a
   * sum of ordinary size, relative to its matrix's typical sum for a sum near zero (a column whose
   * activations are tiny differences: there the float rounding of the activations dominates).
   */
  readonly scaled: number;
  /** Where `scaled` is largest: "name[matrix] column". */
  readonly at: string;
}

/**
 * How far `ours` is from `reference`, sum by sum. Throws when they do not have the same tensors
 * and shapes (compare names and counts first for a readable failure).
 */
export function imatrixDeviation(ours: Imatrix, reference: Imatrix): ImatrixDeviation {
  let relative = 0;
  let scaled = 0;
  let at = "";
  for (const [name, expected] of reference.entries) {
    const actual = ours.entries.get(name);
    if (!actual || actual.sums.length !== expected.sums.length) throw new Error(`imatrix entry ${name}: missing or of another size`);
    const columns = expected.sums.length / expected.counts.length;
    for (let m = 0; m < expected.counts.length; m++) {
      let mean = 0;
      for (let c = 0; c < columns; c++) mean += Math.abs(expected.sums[m * columns + c]!) / columns;
      for (let c = 0; c < columns; c++) {
        const want = expected.sums[m * columns + c]!;
        const difference = Math.abs(actual.sums[m * columns + c]! - want);
        relative = Math.max(relative, want === 0 ? (difference === 0 ? 0 : Number.POSITIVE_INFINITY) : difference / Math.abs(want));
        const s = difference === 0 ? 0 : difference / (Math.abs(want) + mean);
        if (s > scaled) {
          scaled = s;
          at = `${name}[${m}] column ${c}`;
        }
      }
    }
  }
  return { relative, scaled, at };
}

/**
 * Bounds on ImatrixDeviation.scaled by the model's weight type. Measured (reference and native CPU
 * backends, every case): f32 models at most 1.4e-6 (relative to the sum itself: 2.9e-6 for sums of
 * ordinary size, up to 2.1e-3 for the few near zero); q8_0 at most 2.4e-3, where the activations
 * rounded to q8_0 for the matmuls (as ggml rounds them) land on the other side of a rounding boundary
 * now and then and the difference grows through the layers.
 */
export const IMATRIX_BOUNDS: Readonly<Record<string, number>> = { f32: 1e-5, q8_0: 1e-2 };

export interface ImatrixGoldenSuiteBackend {
  readonly name: string;
  readonly create: () => Backend;
  /** Bounds on ImatrixDeviation.scaled by weight type instead of IMATRIX_BOUNDS. */
  readonly bounds?: Readonly<Record<string, number>>;
  /** Only these case ids (the others are listed as skipped). Default: all. */
  readonly only?: readonly string[];
}

/** One test per golden case: computeImatrix on the backend against llama-imatrix's file. */
export function defineImatrixGoldenSuite(backend: ImatrixGoldenSuiteBackend): void {
  const goldens = loadImatrixGoldens();
  const unknown = (backend.only ?? []).filter((id) => !goldens.cases.some((c) => c.id === id));
  if (unknown.length > 0) throw new Error(`imatrix goldens: no cases ${unknown.join(", ")}`);
  const cases = goldens.cases.filter((c) => backend.only?.includes(c.id) ?? true);
  const left = goldens.cases.filter((c) => !cases.includes(c));
  describe(`computeImatrix against llama-imatrix (${backend.name} backend)`, () => {
    if (left.length > 0) it.skip(`not selected: ${left.map((c) => c.id).join(", ")}`, () => {});
    it.each(cases.map((c) => [c.id, c] as const))("%s", async (_id, c) => {
      const path = await syntheticModelFile(resolveOptions(c.preset, c.options));
      expect(basename(path), "the generator no longer writes the file the goldens were recorded on: regenerate them").toBe(c.modelFile);
      const reference = readImatrix(imatrixGoldenPath(c));
      const ours = computeImatrix(path, imatrixCalibrationText(), {
        backend: backend.create(),
        contextSize: c.contextSize,
        kvType: "f32",
        dataset: goldens.calibration,
        ...(c.chunks !== undefined ? { chunks: c.chunks } : {}),
        ...(c.processOutput ? { processOutput: true } : {}),
      });
      expect([...ours.entries.keys()]).toEqual([...reference.entries.keys()]);
      expect(Object.fromEntries([...ours.entries].map(([name, entry]) => [name, entry.counts]))).toEqual(Object.fromEntries([...reference.entries].map(([name, entry]) => [name, entry.counts])));
      expect({ chunkCount: ours.chunkCount, chunkSize: ours.chunkSize, datasets: ours.datasets }).toEqual({ chunkCount: reference.chunkCount, chunkSize: reference.chunkSize, datasets: reference.datasets });
      const weightType = resolveOptions(c.preset, c.options).weightType;
      const bound = (backend.bounds ?? IMATRIX_BOUNDS)[weightType];
      if (bound === undefined) throw new Error(`no imatrix bound for weight type ${weightType}`);
      const deviation = imatrixDeviation(ours, reference);
      expect(deviation.scaled, `largest scaled sum deviation, at ${deviation.at} (relative ${deviation.relative})`).toBeLessThanOrEqual(bound);
    }, 120_000);
  });
}
