import { type Candidates, gatherCandidates, selectTopIndices, softmax, sortPositionsByRank } from "./candidates";

/** Unsorted candidates above this many are first searched among their top 256 (llama.cpp's heuristic). */
const PARTIAL_SORT_ABOVE = 1024;
const PARTIAL_SORT_FIRST = 256;
/** Logit buckets of the second search (see `searchByBuckets`). */
const BUCKETS = 4096;
/** Probability the second search takes beyond p, so that float32 summation cannot need more. */
const MARGIN = 0.01;

/**
 * llama.cpp's top-p (nucleus): keeps the smallest prefix of the candidates in descending
 * probability whose probabilities sum to at least `p` (float32 sum), and at least `minKeep`.
 * p >= 1 disables it. Sorts the survivors; on many unsorted candidates it looks among the top 256
 * by partial selection, then among the candidates of the highest logit buckets (searchByBuckets),
 * then the top 2048, and sorts everything only if those do not reach p (llama.cpp goes from 256 to
 * all); the result is the same either way.
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
  // Search among the best first; if they do not reach p, among the candidates of the highest
  // logit buckets holding p (and a margin); if those do not either, among 8 times as many, then all.
  let selected = length > PARTIAL_SORT_ABOVE ? PARTIAL_SORT_FIRST : length;
  if (selected < length) {
    selectTopIndices(candidates, selected, order);
    const keep = cutoff(probabilities, order, selected, threshold, minKeep);
    if (keep !== -1) {
      gatherCandidates(candidates, order, keep);
      candidates.sorted = true;
      return;
    }
    if (searchByBuckets(candidates, threshold, minKeep)) return;
    selected = selected * 8;
  }
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

/**
 * The top-p prefix found without sorting every candidate: the logits are put in BUCKETS buckets of
 * equal width from the highest down (a candidate's bucket never decreases as its logit does), the
 * buckets' probability summed until p + MARGIN, and only the candidates of those buckets sorted.
 * They are the first of the whole order (every other logit is lower), so when their float32 sum
 * reaches p the prefix is the full sort's; false (nothing changed) when it does not, or when the
 * ids do not ascend (ties by position would then not be ties by id).
 */
function searchByBuckets(candidates: Candidates, threshold: number, minKeep: number): boolean {
  const { logits, probabilities, ids, scratchIndices: order, length } = candidates;
  let max = Number.NEGATIVE_INFINITY;
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < length; i++) {
    const logit = logits[i]!;
    if (i > 0 && ids[i]! <= ids[i - 1]!) return false;
    if (logit > max) max = logit;
    if (logit < min && logit > Number.NEGATIVE_INFINITY) min = logit;
  }
  if (!(max > min) || !Number.isFinite(max - min)) return false;
  const scale = (BUCKETS - 1) / (max - min);
  const bucketOf = (logit: number) => (logit >= min ? Math.floor((max - logit) * scale) : BUCKETS - 1);
  const mass = new Float64Array(BUCKETS);
  for (let i = 0; i < length; i++) mass[bucketOf(logits[i]!)]! += probabilities[i]!;
  let last = 0;
  let cumulative = mass[0]!;
  while (cumulative < threshold + MARGIN && last < BUCKETS - 1) cumulative += mass[++last]!;
  let count = 0;
  for (let i = 0; i < length; i++) if (bucketOf(logits[i]!) <= last) order[count++] = i;
  if (count < minKeep || count === length) return false;
  sortPositionsByRank(candidates, order, count);
  const keep = cutoff(probabilities, order, count, threshold, minKeep);
  if (keep === -1) return false;
  gatherCandidates(candidates, order, keep);
  candidates.sorted = true;
  return true;
}
