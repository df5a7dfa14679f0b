import { type Candidates, softmax } from "./candidates";

const f = Math.fround;

/** How many of the most probable candidates Mirostat 1.0 estimates the Zipf exponent from (llama.cpp's common_sampler passes 100). */
export const MIROSTAT_M = 100;

/** C's powf as llama.cpp calls it, in float32: pow(1, y) and pow(-1, ±Infinity) are 1, where JavaScript's Math.pow gives NaN. */
function powf(base: number, exponent: number): number {
  if (base === 1 || (base === -1 && Math.abs(exponent) === Infinity)) return 1;
  return f(Math.pow(base, exponent));
}

/**
 * The k of a float as llama.cpp's `int(k)` gives it on x86-64 (cvttss2si): truncated toward zero,
 * and INT_MIN for NaN or a value outside the int32 range (a flat distribution makes k overflow).
 */
function int32OfFloat(value: number): number {
  if (Number.isNaN(value) || value >= 2147483648 || value < -2147483648) return -2147483648;
  return Math.trunc(value);
}

/** Mirostat's target threshold before the first token: 2·tau (llama.cpp's `2.0f*tau`, in float32). */
export function mirostatInitialMu(tau: number): number {
  return f(2 * f(tau));
}

/**
 * llama.cpp's Mirostat 1.0 (Basu et al. 2021, arXiv:2007.14966) up to its pick: the candidates
 * sorted with their softmax; the Zipf exponent s estimated by least squares from the `m` most
 * probable (s = Σ tᵢbᵢ / Σ tᵢ², tᵢ = ln((i+2)/(i+1)), bᵢ = ln(pᵢ/pᵢ₊₁)); with ε = s − 1 and N the
 * vocabulary size, k = (ε·2^mu / (1 − N^−ε))^(1/s); the best max(int(k), 1) candidates are kept,
 * their softmax left in `candidates.probabilities`. Float32 arithmetic as llama.cpp; an int(k) out
 * of the int32 range or of a NaN k keeps 1 candidate, as llama.cpp's conversion does on x86-64.
 */
export function mirostat(candidates: Candidates, mu: number, vocabularySize: number, m = MIROSTAT_M): void {
  softmax(candidates, true);
  const { probabilities, length } = candidates;
  let sumTimesLogRatio = 0;
  let sumSquares = 0;
  const pairs = Math.min(m - 1, length - 1);
  for (let i = 0; i < pairs; i++) {
    const t = f(Math.log(f(f(i + 2) / f(i + 1))));
    const logRatio = f(Math.log(f(probabilities[i]! / probabilities[i + 1]!)));
    sumTimesLogRatio = f(sumTimesLogRatio + f(t * logRatio));
    sumSquares = f(sumSquares + f(t * t));
  }
  const exponent = f(sumTimesLogRatio / sumSquares);
  const epsilon = f(exponent - 1);
  const k = powf(f(f(epsilon * powf(2, mu)) / f(1 - powf(f(vocabularySize), -epsilon))), f(1 / exponent));
  candidates.length = Math.min(Math.max(int32OfFloat(k), 1), length);
  softmax(candidates, false);
}

/**
 * llama.cpp's Mirostat 2.0 up to its pick: the candidates sorted with their softmax, cut before the
 * first whose surprise −log2 p exceeds mu (at least one kept), their softmax left in
 * `candidates.probabilities`. Float32 arithmetic as llama.cpp.
 */
export function mirostatV2(candidates: Candidates, mu: number): void {
  softmax(candidates, true);
  const { probabilities, length } = candidates;
  let kept = 0;
  while (kept < length && !(-f(Math.log2(probabilities[kept]!)) > mu)) kept++;
  candidates.length = Math.max(kept, 1);
  softmax(candidates, false);
}

/**
 * Mirostat's update after a pick (both versions): mu − eta·(−log2 p − tau), where p is the picked
 * candidate's probability among the kept ones. Float32 as llama.cpp.
 */
export function mirostatUpdate(mu: number, tau: number, eta: number, probability: number): number {
  const error = f(-f(Math.log2(probability)) - f(tau));
  return f(mu - f(f(eta) * error));
}
