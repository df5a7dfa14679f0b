import { Candidates } from "../candidates";
import { mulberry32 } from "@memra/synthetic";

/** Candidates whose logits are logf(p) of the given probabilities, as llama.cpp's test-sampling.cpp builds them. */
export function candidatesFromProbabilities(probabilities: readonly number[]): Candidates {
  return Candidates.fromLogits(probabilities.map((p) => Math.fround(Math.log(Math.fround(p)))));
}

/** Softmax in float64 of the live candidates' logits, in candidate order. */
export function softmaxOf(candidates: Candidates): number[] {
  const logits = Array.from(candidates.logits.subarray(0, candidates.length));
  const max = Math.max(...logits);
  const exps = logits.map((logit) => Math.exp(logit - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

/** The live candidates' ids. */
export function idsOf(candidates: Candidates): number[] {
  return Array.from(candidates.ids.subarray(0, candidates.length));
}

/** A deterministic stream of numbers in [0, 1) for building test inputs (mulberry32). */
export const testRandom = mulberry32;
