import type { Candidates } from "./candidates";
import { argmax, logSumExp } from "./log-sum-exp";
import { SamplerError } from "./sampler-error";
import type { SeededRandom } from "./seeded-random";

export interface SampleResult {
  /** The chosen token id. */
  token: number;
  /**
   * Natural log of the chosen token's probability under the distribution it was chosen from: for a
   * random pick, the softmax of the candidates left at the end of the chain (after truncation and
   * temperature); for a greedy pick (temperature 0), the softmax over the whole vocabulary of the
   * logits after logit bias, penalties and DRY, at temperature 1.
   */
  logprob: number;
}

function noCandidate(): never {
  throw new SamplerError("no token can be sampled: every candidate has logit -Infinity (banned by logitBias?)");
}

/**
 * llama.cpp's greedy sampler: the candidate with the largest logit (the first, in candidate order,
 * among equals). `logprob` is under the softmax of the candidates as they are.
 */
export function pickGreedy(candidates: Candidates): SampleResult {
  const { ids, logits, length } = candidates;
  if (length < 1) noCandidate();
  const best = argmax(logits, length);
  const max = logits[best]!;
  if (max === -Infinity) noCandidate();
  return { token: ids[best]!, logprob: max - logSumExp(logits, length, max) };
}

/**
 * llama.cpp's `dist` sampler: softmax of the candidates (p = expf(logit − max) in float32, summed
 * in float64), one uniform double u from `random`, and the first candidate, in candidate order, at
 * which the running sum reaches u · sum. Candidates with probability 0 are never picked (llama.cpp
 * can pick one when u is exactly 0). A single candidate is taken without a draw, as llama.cpp does.
 * Leaves the normalized probabilities in `candidates.probabilities`.
 */
export function pickDistribution(candidates: Candidates, random: SeededRandom): SampleResult {
  const { ids, logits, probabilities, length } = candidates;
  if (length < 1) noCandidate();
  let max = logits[0]!;
  if (!candidates.sorted) for (let i = 1; i < length; i++) if (logits[i]! > max) max = logits[i]!;
  if (max === -Infinity) noCandidate();
  if (length === 1) {
    probabilities[0] = 1;
    return { token: ids[0]!, logprob: 0 };
  }
  let sum = 0;
  for (let i = 0; i < length; i++) {
    const p = Math.fround(Math.exp(Math.fround(logits[i]! - max)));
    probabilities[i] = p;
    sum += p;
  }
  const target = sum * random.nextDouble();
  let running = 0;
  let selected = -1;
  let selectedProbability = 0;
  for (let i = 0; i < length; i++) {
    const p = probabilities[i]!;
    if (selected < 0) {
      running += p;
      if (running >= target && p > 0) {
        selected = i;
        selectedProbability = p;
      }
    }
    probabilities[i] = p / sum;
  }
  if (selected < 0) {
    // Rounding left the running sum short of the target: the last candidate with p > 0.
    for (let i = length - 1; i >= 0; i--) {
      if (probabilities[i]! > 0) {
        selected = i;
        selectedProbability = probabilities[i]! * sum;
        break;
      }
    }
  }
  return { token: ids[selected]!, logprob: Math.log(selectedProbability) - Math.log(sum) };
}
