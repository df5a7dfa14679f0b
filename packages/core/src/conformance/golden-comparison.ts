import type { Model } from "../load-model";
import { logSumExp } from "../evaluation";

/** One model's llama.cpp outputs (tools/llamacpp/model-goldens.mjs writes these). */
export interface GoldenModelFile {
  readonly suiteVersion: number;
  readonly model: { readonly id: string; readonly preset: string; readonly options: Record<string, unknown>; readonly file: string };
  readonly reference: Record<string, unknown>;
  readonly prompts: readonly GoldenPrompt[];
}

export interface GoldenPrompt {
  readonly id: string;
  readonly text: string;
  readonly special: boolean;
  readonly promptTokens: readonly number[];
  /** llama.cpp's greedy continuation. */
  readonly continuation: readonly number[];
  /** Step i: the distribution after prompt + continuation[0..i-1]: top tokens [id, probability] and the top-1/top-2 logit margin. */
  readonly steps: ReadonlyArray<{ readonly top: ReadonlyArray<readonly [number, number]>; readonly margin: number }>;
}

export interface StepMismatch {
  readonly prompt: string;
  readonly step: number;
  readonly expected: number;
  readonly actual: number;
  readonly margin: number;
}

export interface GoldenComparison {
  /** Steps compared (every step of every prompt unless a stride was given). */
  readonly steps: number;
  /** Steps where llama.cpp's margin was at least the bound, so the top-1 must agree. */
  readonly decidedSteps: number;
  /** Decided steps whose top-1 differs from llama.cpp's token. */
  readonly argmaxMismatches: StepMismatch[];
  /** Undecided steps (margin below the bound) whose top-1 differs: allowed near-ties. */
  readonly nearTieFlips: number;
  /** Largest |p_ours − p_llama.cpp| over llama.cpp's top-K tokens of every step. */
  readonly maxProbabilityDifference: number;
  readonly meanProbabilityDifference: number;
}

/** The steps of a prompt's `count` that a comparison with `stride` checks: 0, stride, 2·stride, ... and the last. */
export function comparedSteps(count: number, stride = 1): number[] {
  if (!Number.isInteger(stride) || stride < 1) throw new RangeError(`stride must be a positive integer, got ${stride}`);
  const steps: number[] = [];
  for (let step = 0; step < count; step += stride) steps.push(step);
  if (count > 0 && steps.at(-1) !== count - 1) steps.push(count - 1);
  return steps;
}

/**
 * Teacher forcing: feeds llama.cpp's prompt and greedy continuation to our model in one prefill
 * per prompt and compares, at every step, our top-1 with llama.cpp's token (where llama.cpp's
 * margin is at least `marginBound`) and our probabilities of llama.cpp's top-K tokens with its own.
 * With `stride` k > 1, only steps 0, k, 2k, ... and each prompt's last get logits and are compared
 * (every position still runs through the model, so the last step sees the whole context): the LM
 * head, k times fewer rows, is what a slow backend spends its time on.
 */
export function compareWithGolden(model: Model, golden: GoldenModelFile, marginBound: number, stride = 1): GoldenComparison {
  const vocabulary = model.vocabularySize;
  const argmaxMismatches: StepMismatch[] = [];
  let steps = 0;
  let decidedSteps = 0;
  let nearTieFlips = 0;
  let maxDifference = 0;
  let sumDifference = 0;
  let probabilities = 0;
  for (const prompt of golden.prompts) {
    const stepCount = prompt.steps.length;
    const input = [...prompt.promptTokens, ...prompt.continuation.slice(0, stepCount - 1)];
    const first = prompt.promptTokens.length - 1;
    const compared = comparedSteps(stepCount, stride);
    const rows = compared.map((step) => first + step);
    const cache = model.createCache(input.length, { type: "f32" }); // the goldens were recorded with an f32 KV cache
    const logits = model.forward(input, cache, { logits: rows });
    cache.dispose();
    for (const [index, step] of compared.entries()) {
      const row = logits.subarray(index * vocabulary, (index + 1) * vocabulary);
      const normaliser = logSumExp(row);
      let best = 0;
      for (let i = 1; i < vocabulary; i++) if (row[i]! > row[best]!) best = i;
      const expected = prompt.continuation[step]!;
      const { top, margin } = prompt.steps[step]!;
      steps++;
      if (margin >= marginBound) {
        decidedSteps++;
        if (best !== expected) argmaxMismatches.push({ prompt: prompt.id, step, expected, actual: best, margin });
      } else if (best !== expected) {
        nearTieFlips++;
      }
      for (const [id, probability] of top) {
        const difference = Math.abs(Math.exp(row[id]! - normaliser) - probability);
        maxDifference = Math.max(maxDifference, difference);
        sumDifference += difference;
        probabilities++;
      }
    }
  }
  return {
    steps,
    decidedSteps,
    argmaxMismatches,
    nearTieFlips,
    maxProbabilityDifference: maxDifference,
    meanProbabilityDifference: probabilities === 0 ? 0 : sumDifference / probabilities,
  };
}
