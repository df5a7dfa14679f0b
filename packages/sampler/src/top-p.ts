import { type Candidates, gatherCandidates, selectTopIndices, softmax } from "./candidates";

/** Unsorted candidates above this many are first searched among their top 256 (llama.cpp's heuristic). */
const PARTIAL_SORT_ABOVE = 1024;
const PARTIAL_SORT_FIRST = 256;

/**
 * llama.cpp's top-p (nucleus): keeps the smallest prefix of the candidates in descending
 * probability whose probabilities sum to at least `p` (float32 sum), and at least `minKeep`.
 * p >= 1 disables it. Sorts the survivors; on many unsorted candidates it looks among the top 256
 * by partial selection, then the top 2048, and sorts everything only if those do not reach p
 * (llama.cpp goes from 256 to all); the result is the same either way.
 */
export function topP(candidates: Candidates, p: number, minKeep = 1): void {
  if (p >= 1) return;
  softmax(candidates, false);
  const threshold = Math.fround(p);
  const { probabilities, scratchIndices: order } = candidates;
  const length = candidates.length;

  if (candidates.sorted) {
    candidates.length = cutoff(probabilities, null, length, threshold, minKeep);
    return;
  }
  // Search among the best first; if they do not reach p, among 8 times as many, then all.
  let selected = length > PARTIAL_SORT_ABOVE ? PARTIAL_SORT_FIRST : length;
  while (true) {
    selectTopIndices(candidates, selected, order);
    const keep = cutoff(probabilities, order, selected, threshold, minKeep);
    if (keep !== -1 || selected === length) {
      gatherCandidates(candidates, order, keep === -1 ? length : keep);
      candidates.sorted = true;
      return;
    }
    selected = selected * 8 > length / 2 ? length : selected * 8;
  }
}

/** How many of the first `count` (through `order` when given) reach the threshold; -1 if none does. */
function cutoff(probabilities: Float32Array, order: Int32Array | null, count: number, threshold: number, minKeep: number): number {
  let cumulative = 0;
  for (let i = 0; i < count; i++) {
    cumulative = Math.fround(cumulative + probabilities[order ? order[i]! : i]!);
    if (cumulative >= threshold && i + 1 >= minKeep) return i + 1;
  }
  return order ? -1 : count;
}
