import { type Candidates, gatherCandidates, selectTopIndices } from "./candidates";

/**
 * llama.cpp's top-k: keeps the k highest logits, sorted (descending; equal logits by ascending id).
 * k <= 0 disables it. Unsorted candidates are reduced by partial selection, not a full sort.
 */
export function topK(candidates: Candidates, k: number): void {
  if (k <= 0) return;
  const keep = Math.min(k, candidates.length);
  if (!candidates.sorted) {
    selectTopIndices(candidates, keep, candidates.scratchIndices);
    gatherCandidates(candidates, candidates.scratchIndices, keep);
    candidates.sorted = true;
  }
  candidates.length = keep;
}
