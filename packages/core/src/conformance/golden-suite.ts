/**
 * The golden conformance suite: every model of golden-suite.json against llama.cpp's recorded
 * outputs (tools/llamacpp/model-goldens.mjs), by teacher forcing. One parametrised suite that
 * takes a backend, so every backend runs exactly the same checks.
 *
 * Per step: our top-1 must equal llama.cpp's greedy token wherever llama.cpp's top-1/top-2 logit
 * margin is at least MARGIN_BOUND; our probabilities of llama.cpp's top-5 tokens may differ from
 * its own by at most the bound of the model's weight type (largest and mean difference).
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { type PresetName, type SyntheticLoraOptions, type SyntheticModelOptions, resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { describe, expect, it } from "vitest";
import type { Backend } from "../backend";
import { loadModel } from "../load-model";
import { type GoldenModelFile, compareWithGolden, comparedSteps } from "./golden-comparison";

export const MARGIN_BOUND = 0.1;

export interface ProbabilityBound {
  /** Largest |p_ours − p_llama.cpp| allowed over every step's top-5. */
  readonly max: number;
  /** Mean of those differences allowed. */
  readonly mean: number;
}

/**
 * Bounds per weight type, for a backend that rounds activations the way ggml's CPU matmul does
 * (q8_0 / q8_K / f16 / bf16, see activation-rounding.ts). f32 models agree to ~1e-6. Quantized
 * models agree to ~1e-6 too on most prompts; the rest of the difference comes from rare rounding
 * flips: where an activation times 127/max lands within float32 noise of a half-integer, our sum
 * order and llama.cpp's round it to neighbouring integers, and the changed activation propagates.
 * Measured largest differences (reference backend, 23 models × 8 prompts × 32 steps): f32 1.2e-6,
 * f16 6.7e-4, bf16 5.6e-3, q8_0 1.6e-2, q4_0 1.3e-2, q4_1 1.8e-2, q5_0 1.4e-2, q5_1 1.8e-2,
 * q2_K 1.5e-2, q3_K 9.0e-7, q4_K 2.9e-2, q5_K 2.2e-2, q6_K 1.7e-2, q4_K_M 5.7e-2 (MoE: a flip can
 * also change an expert); the bounds leave about 1.5× headroom, the mean bounds about 3×.
 * q2_K and q3_K take their headroom over the other backends that share these bounds: which prompts
 * hit a flip depends on the summation order, and the reference hits none on dense-q3_K (every prompt
 * within 1e-6). Largest differences on the native CPU backend: q2_K 1.5e-2 (avx512vnni, scalar),
 * 1.9e-2 (avx2); q3_K 2.5e-2 (avx512vnni), 1.7e-2 (avx2), 8.4e-7 (scalar); on the CUDA emulator
 * q2_K 7.1e-3, q3_K 2.2e-2. Mean differences at most 4.5e-4 (q3_K, CUDA emulator).
 */
export const PROBABILITY_BOUNDS: Record<string, ProbabilityBound> = {
  f32: { max: 1e-5, mean: 1e-6 },
  f16: { max: 2e-3, mean: 2e-4 },
  bf16: { max: 1.5e-2, mean: 1e-3 },
  q8_0: { max: 3e-2, mean: 2e-3 },
  q4_0: { max: 3e-2, mean: 2e-3 },
  q4_1: { max: 4e-2, mean: 6e-3 },
  q5_0: { max: 3e-2, mean: 2e-3 },
  q5_1: { max: 4e-2, mean: 6e-3 },
  q2_K: { max: 3e-2, mean: 1.5e-3 },
  q3_K: { max: 4e-2, mean: 1.5e-3 },
  q4_K: { max: 5e-2, mean: 2e-3 },
  q5_K: { max: 4e-2, mean: 2e-3 },
  q6_K: { max: 3e-2, mean: 2e-3 },
  q4_K_M: { max: 8e-2, mean: 3e-3 },
  // The i-quants (random-block weights, see @memra/synthetic). Reference backend: iq2_xxs 2.1e-2
  // (MoE 2.7e-2), iq2_xs 9.3e-7, iq2_s 3.3e-2, iq3_xxs 3.6e-2, iq3_s 1.7e-2, iq1_s 8.0e-7, iq1_m
  // 9.2e-3; mean differences at most 4.8e-4 (MoE). The same rounding flips as the other types.
  iq2_xxs: { max: 5e-2, mean: 2e-3 },
  iq2_xs: { max: 5e-2, mean: 2e-3 },
  iq2_s: { max: 5e-2, mean: 2e-3 },
  iq3_xxs: { max: 5e-2, mean: 2e-3 },
  iq3_s: { max: 5e-2, mean: 2e-3 },
  iq1_s: { max: 5e-2, mean: 2e-3 },
  iq1_m: { max: 5e-2, mean: 2e-3 },
};

interface SuiteDefinition {
  readonly version: number;
  readonly models: ReadonlyArray<{
    readonly id: string;
    readonly preset: string;
    readonly options: Partial<SyntheticModelOptions>;
    /** A synthetic LoRA adapter applied to the model (llama.cpp's --lora-scaled), when given. */
    readonly lora?: { readonly options: SyntheticLoraOptions; readonly scale: number };
  }>;
}

const SUITE_FILE = new URL("./golden-suite.json", import.meta.url);
const GOLDENS = new URL("../__fixtures__/goldens/", import.meta.url);

export function loadGoldenSuite(): { suite: SuiteDefinition; goldens: Map<string, GoldenModelFile> } {
  const suite = JSON.parse(readFileSync(SUITE_FILE, "utf8")) as SuiteDefinition;
  const goldens = new Map<string, GoldenModelFile>();
  for (const model of suite.models) goldens.set(model.id, JSON.parse(readFileSync(new URL(`${model.id}.json`, GOLDENS), "utf8")) as GoldenModelFile);
  return { suite, goldens };
}

export interface GoldenSuiteBackend {
  readonly name: string;
  readonly create: () => Backend;
  /** Bounds to use instead of PROBABILITY_BOUNDS (a backend with other rounding states its own). */
  readonly bounds?: Record<string, ProbabilityBound>;
  /** Run every `count`-th model starting at `index`, so the suite can be split over test files (and workers). */
  readonly shard?: { readonly index: number; readonly count: number };
  /** Only these model ids (before sharding); the others are listed as skipped. Default: all. */
  readonly only?: readonly string[];
  /** Compare steps 0, k, 2k, ... and each prompt's last only (compareWithGolden's stride). Default 1: every step. */
  readonly stepStride?: number;
  /**
   * Run the models last first. The reference suite's two files start from the first model; a file
   * run beside them in the other order rarely needs a synthetic model they are generating at that
   * moment (it would wait for it: see the synthetic package's generateOnce) and generates the rest.
   */
  readonly lastFirst?: boolean;
}

/** Defines one test per suite model, run on `backend`. */
export function defineGoldenSuite(backend: GoldenSuiteBackend): void {
  const { suite, goldens } = loadGoldenSuite();
  const bounds = backend.bounds ?? PROBABILITY_BOUNDS;
  const shard = backend.shard ?? { index: 0, count: 1 };
  const unknown = (backend.only ?? []).filter((id) => !suite.models.some((model) => model.id === id));
  if (unknown.length > 0) throw new Error(`golden suite: no models ${unknown.join(", ")} in golden-suite.json`);
  const selected = backend.only ? suite.models.filter((model) => backend.only!.includes(model.id)) : suite.models;
  const models = selected.filter((_, i) => i % shard.count === shard.index);
  const left = suite.models.filter((model, i) => !selected.includes(model) && i % shard.count === shard.index);
  const part = `${shard.count > 1 ? `, part ${shard.index + 1} of ${shard.count}` : ""}${(backend.stepStride ?? 1) > 1 ? `, every ${backend.stepStride}th step and the last` : ""}`;
  describe(`golden conformance suite against llama.cpp (${backend.name} backend${part})`, () => {
    if (left.length > 0) it.skip(`not selected: ${left.map((model) => model.id).join(", ")}`, () => {});
    it.each((backend.lastFirst ? [...models].reverse() : models).map((m) => [m.id, m] as const))("%s", async (_id, entry) => {
      const golden = goldens.get(entry.id)!;
      expect(golden.suiteVersion, "fixture and suite versions differ: regenerate the goldens").toBe(suite.version);
      const options = resolveOptions(entry.preset as PresetName, entry.options);
      const path = await syntheticModelFile(options);
      expect(basename(path), "the generator no longer writes the file the goldens were recorded on: regenerate the goldens").toBe(golden.model.file);
      const weightType = options.weightType;
      const bound = bounds[weightType];
      if (!bound) throw new Error(`no probability bound for weight type ${weightType}`);

      const lora = entry.lora ? [{ path: await syntheticLoraFile(options, entry.lora.options), scale: entry.lora.scale }] : undefined;
      const model = loadModel(path, { backend: backend.create(), ...(lora ? { lora } : {}) });
      try {
        const stride = backend.stepStride ?? 1;
        const result = compareWithGolden(model, golden, MARGIN_BOUND, stride);
        expect(result.steps).toBe(golden.prompts.reduce((n, p) => n + comparedSteps(p.steps.length, stride).length, 0));
        expect(result.argmaxMismatches, `top-1 differs from llama.cpp where its margin is ≥ ${MARGIN_BOUND}`).toEqual([]);
        expect(result.maxProbabilityDifference, `largest top-5 probability difference (${weightType})`).toBeLessThanOrEqual(bound.max);
        expect(result.meanProbabilityDifference, `mean top-5 probability difference (${weightType})`).toBeLessThanOrEqual(bound.mean);
      } finally {
        model.dispose();
      }
    }, 300_000);
  });
}
