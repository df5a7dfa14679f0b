import { type Candidates, RADIX_SORT_ABOVE, gatherCandidates, softmax, sortIndicesByKey } from "./candidates";

/**
 * llama.cpp's locally typical sampling (Meister et al. 2022): with the entropy H of the candidates'
 * softmax, candidates are ordered by |−log p − H| (ascending) and the shortest prefix whose
 * probabilities sum to more than `p` is kept (at least `minKeep`). p >= 1 disables it. Leaves the
 * candidates in that order, so unsorted. Float32 arithmetic as llama.cpp; candidates with p = 0
 * are left out of the entropy (llama.cpp's 0·log 0 would make it NaN).
 */
export function typical(candidates: Candidates, p: number, minKeep = 1): void {
  if (p >= 1) return;
  softmax(candidates, true);
  const { probabilities, length, scratchIndices: order, scratchScores: scores } = candidates;
  let entropy = 0;
  for (let i = 0; i < length; i++) {
    const probability = probabilities[i]!;
    if (probability > 0) entropy = Math.fround(entropy + Math.fround(-probability * Math.fround(Math.log(probability))));
  }
  for (let i = 0; i < length; i++) {
    scores[i] = Math.abs(Math.fround(-Math.fround(Math.log(probabilities[i]!)) - entropy));
    order[i] = i;
  }
  sortIndicesByKey(order, scores, length, length > RADIX_SORT_ABOVE ? candidates.radix() : undefined);

  const threshold = Math.fround(p);
  let cumulative = 0;
  let keep = length;
  for (let i = 0; i < length; i++) {
    cumulative = Math.fround(cumulative + probabilities[order[i]!]!);
    if (cumulative > threshold && (minKeep === 0 || i >= minKeep - 1)) {
      keep = i + 1;
      break;
    }
  }
  gatherCandidates(candidates, order, keep);
  candidates.sorted = false;
}
