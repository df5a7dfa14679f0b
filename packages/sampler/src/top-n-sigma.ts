import type { Candidates } from "./candidates";

const f = Math.fround;

/**
 * llama.cpp's top-nσ (Tang et al. 2024, "Top-nσ: Not All Logits Are You Need"): with M the largest
 * logit and μ, σ the mean and standard deviation of the finite logits, every candidate whose logit
 * is below M − n·σ gets logit -Infinity. As in llama.cpp the candidates stay (with probability 0)
 * and keep their order; n <= 0 (llama.cpp's default is -1) or fewer than 2 candidates disable it.
 * Float32 arithmetic as llama.cpp: the sums in a float, the squares in double.
 */
export function topNSigma(candidates: Candidates, n: number): void {
  const { logits, length } = candidates;
  if (!(n > 0) || length <= 1) return;
  let max = logits[0]!;
  let sum = 0;
  let count = 0;
  for (let i = 0; i < length; i++) {
    const logit = logits[i]!;
    if (logit === -Infinity) continue;
    if (logit > max) max = logit;
    sum = f(sum + logit);
    count++;
  }
  const mean = count > 0 ? f(sum / count) : 0;
  let squares = 0;
  for (let i = 0; i < length; i++) {
    const logit = logits[i]!;
    if (logit === -Infinity) continue;
    const deviation = f(logit - mean);
    squares = f(squares + deviation * deviation);
  }
  const deviation = count > 0 ? f(Math.sqrt(f(squares / count))) : 0;
  const threshold = f(max - f(f(n) * deviation));
  for (let i = 0; i < length; i++) if (logits[i]! < threshold) logits[i] = -Infinity;
}
