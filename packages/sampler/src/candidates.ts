import { SamplerError } from "./sampler-error";

/**
 * The candidate tokens of one sampling step, as llama.cpp's `llama_token_data_array`: parallel
 * arrays of token ids, logits and probabilities of which the first `length` entries are live.
 * Allocated once for a vocabulary size; every step works in place on these arrays and on the
 * scratch arrays, so sampling a token allocates nothing.
 *
 * Order: when `sorted` is true the live entries are in descending logit order, equal logits by
 * ascending token id (llama.cpp leaves the order of equal logits unspecified; here it is fixed so
 * that a seed gives the same tokens everywhere).
 */
export class Candidates {
  readonly capacity: number;
  readonly ids: Int32Array; // [capacity] token id of each candidate
  readonly logits: Float32Array; // [capacity]
  readonly probabilities: Float32Array; // [capacity] valid only right after a step that computes them (softmax)
  /** Number of live candidates. */
  length = 0;
  /** True when logits[0..length) are in descending order (see the class comment for ties). */
  sorted = false;

  // Work space for the steps (selection heaps, gathers, typical's scores).
  readonly scratchIndices: Int32Array; // [capacity]
  readonly scratchIds: Int32Array; // [capacity]
  readonly scratchLogits: Float32Array; // [capacity]
  readonly scratchProbabilities: Float32Array; // [capacity]
  readonly scratchScores: Float32Array; // [capacity]
  /** The logits' float32 bits, for the radix sort. */
  readonly logitBits: Uint32Array; // [capacity] aliases logits
  private readonly identity: Int32Array; // [capacity] 0, 1, 2, ...
  private radixWork: RadixWork | undefined;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new SamplerError(`vocabularySize must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.ids = new Int32Array(capacity);
    this.logits = new Float32Array(capacity);
    this.probabilities = new Float32Array(capacity);
    this.scratchIndices = new Int32Array(capacity);
    this.scratchIds = new Int32Array(capacity);
    this.scratchLogits = new Float32Array(capacity);
    this.scratchProbabilities = new Float32Array(capacity);
    this.scratchScores = new Float32Array(capacity);
    this.logitBits = new Uint32Array(this.logits.buffer, this.logits.byteOffset, capacity);
    this.identity = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.identity[i] = i;
  }

  /** Candidates holding `logits` (token i has logit logits[i]). */
  static fromLogits(logits: ArrayLike<number>): Candidates {
    return new Candidates(Math.max(1, logits.length)).load(logits);
  }

  /** Every token of `logits` becomes a candidate, in token order (unsorted). */
  load(logits: ArrayLike<number>): this {
    const length = logits.length;
    if (length < 1 || length > this.capacity) throw new SamplerError(`logits have ${length} entries; expected 1 to ${this.capacity} (the vocabulary size)`);
    if (length === this.capacity) this.ids.set(this.identity);
    else for (let i = 0; i < length; i++) this.ids[i] = i;
    if (logits instanceof Float32Array) this.logits.set(logits);
    else for (let i = 0; i < length; i++) this.logits[i] = logits[i]!;
    this.length = length;
    this.sorted = false;
    return this;
  }

  /** Work arrays of the radix sort, allocated on first use (only sorts of many candidates need them). */
  radix(): RadixWork {
    this.radixWork ??= new RadixWork(this.capacity);
    return this.radixWork;
  }

  /** The live candidates as plain objects, for tests and debugging. */
  toArray(): { id: number; logit: number; probability: number }[] {
    const result = [];
    for (let i = 0; i < this.length; i++) result.push({ id: this.ids[i]!, logit: this.logits[i]!, probability: this.probabilities[i]! });
    return result;
  }
}

/** Whether candidate `a` ranks below candidate `b`: a lower logit, or an equal logit and a higher id. */
function ranksBelow(logits: Float32Array, ids: Int32Array, a: number, b: number): boolean {
  const la = logits[a]!;
  const lb = logits[b]!;
  return la < lb || (la === lb && ids[a]! > ids[b]!);
}

/** Restores the heap order below `position` in heap[0..size): the root is the lowest-ranked. */
function siftDown(heap: Int32Array, size: number, position: number, logits: Float32Array, ids: Int32Array): void {
  const item = heap[position]!;
  let parent = position;
  while (true) {
    let child = 2 * parent + 1;
    if (child >= size) break;
    const right = child + 1;
    if (right < size && ranksBelow(logits, ids, heap[right]!, heap[child]!)) child = right;
    if (!ranksBelow(logits, ids, heap[child]!, item)) break;
    heap[parent] = heap[child]!;
    parent = child;
  }
  heap[parent] = item;
}

/** Above this many candidates, selecting more than 1/16 of them is done by a full radix sort. */
export const RADIX_SORT_ABOVE = 4096;

/**
 * Partial selection: writes to `out[0..k)` the positions of the k highest-ranked live candidates,
 * best first, without sorting the rest. One pass with a k-entry heap: O(n + m log k) where m, the
 * number of heap replacements, is about k·ln(n/k) for logits in random order. When k is a large
 * part of many candidates, a radix sort of all of them is faster and is used instead (then
 * out[k..length) holds the rest in order). `out` must hold `candidates.length` entries.
 */
export function selectTopIndices(candidates: Candidates, k: number, out: Int32Array): void {
  const { logits, ids, length } = candidates;
  if (k < 1) return;
  if (k > length) throw new SamplerError(`cannot select ${k} of ${length} candidates`);
  if (length > RADIX_SORT_ABOVE && k * 16 > length) {
    radixSortCandidates(candidates, out);
    return;
  }
  for (let i = 0; i < k; i++) out[i] = i;
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(out, k, i, logits, ids);
  let root = out[0]!;
  let rootLogit = logits[root]!;
  for (let i = k; i < length; i++) {
    const logit = logits[i]!;
    if (logit < rootLogit) continue;
    if (logit === rootLogit && ids[i]! > ids[root]!) continue;
    out[0] = i;
    siftDown(out, k, 0, logits, ids);
    root = out[0]!;
    rootLogit = logits[root]!;
  }
  // Heapsort the heap in place: the lowest-ranked goes to the end each time, leaving best first.
  for (let end = k - 1; end > 0; end--) {
    const lowest = out[0]!;
    out[0] = out[end]!;
    out[end] = lowest;
    siftDown(out, end, 0, logits, ids);
  }
}

const RADIX_BITS = 11;
const RADIX_BUCKETS = 1 << RADIX_BITS;

/** Buffers of a least-significant-digit radix sort over 32-bit keys. */
export class RadixWork {
  readonly keys: Uint32Array; // [capacity]
  readonly keysAlternate: Uint32Array; // [capacity]
  readonly orderAlternate: Int32Array; // [capacity]
  readonly counts = new Int32Array(RADIX_BUCKETS);
  private viewedKeys: Float32Array | undefined;
  private viewedBits: Uint32Array | undefined;

  constructor(capacity: number) {
    this.keys = new Uint32Array(capacity);
    this.keysAlternate = new Uint32Array(capacity);
    this.orderAlternate = new Int32Array(capacity);
  }

  /** The bits of a Float32Array (the view is kept for the next call with the same array). */
  bitsOf(keys: Float32Array): Uint32Array {
    if (keys !== this.viewedKeys || !this.viewedBits) {
      this.viewedKeys = keys;
      this.viewedBits = new Uint32Array(keys.buffer, keys.byteOffset, keys.length);
    }
    return this.viewedBits;
  }
}

/**
 * Stable sort of order[0..count) by ascending work.keys (three 11-bit passes); the keys are
 * consumed. `order` comes back sorted (the passes ping-pong through work.orderAlternate).
 */
export function radixSortByKeys(work: RadixWork, count: number, order: Int32Array): void {
  let keys = work.keys;
  let keysOut = work.keysAlternate;
  let from = order;
  let to = work.orderAlternate;
  const counts = work.counts;
  for (let shift = 0; shift < 32; shift += RADIX_BITS) {
    counts.fill(0);
    for (let i = 0; i < count; i++) counts[(keys[i]! >>> shift) & (RADIX_BUCKETS - 1)]!++;
    let total = 0;
    for (let b = 0; b < RADIX_BUCKETS; b++) {
      const c = counts[b]!;
      counts[b] = total;
      total += c;
    }
    for (let i = 0; i < count; i++) {
      const key = keys[i]!;
      const slot = counts[(key >>> shift) & (RADIX_BUCKETS - 1)]!++;
      keysOut[slot] = key;
      to[slot] = from[i]!;
    }
    [keys, keysOut] = [keysOut, keys];
    [from, to] = [to, from];
  }
  // After an odd number of passes the result is in the alternate buffer.
  if (from !== order) for (let i = 0; i < count; i++) order[i] = from[i]!;
}

/** Float order as unsigned integer order (-0 as +0). */
function ascendingKey(bits: number): number {
  if (bits === 0x80000000) return 0x80000000;
  return (bits & 0x80000000 ? ~bits : bits | 0x80000000) >>> 0;
}

/**
 * Full sort of the live candidates' positions into out[0..length): descending logit, equal logits
 * by ascending id (as `selectTopIndices`). Ids are put in order first unless they already are.
 */
function radixSortCandidates(candidates: Candidates, out: Int32Array): void {
  const { ids, logitBits, length } = candidates;
  const work = candidates.radix();
  const keys = work.keys;
  for (let i = 0; i < length; i++) out[i] = i;
  let ascending = true;
  for (let i = 1; i < length && ascending; i++) ascending = ids[i - 1]! < ids[i]!;
  if (!ascending) {
    for (let i = 0; i < length; i++) keys[i] = ids[i]! >>> 0;
    radixSortByKeys(work, length, out);
  }
  for (let i = 0; i < length; i++) {
    const bits = logitBits[out[i]!]!;
    keys[i] = ~ascendingKey(bits) >>> 0; // descending
  }
  radixSortByKeys(work, length, out);
}

/**
 * Sorts positions[0..count) of live candidates, given in ascending order, by rank (descending logit;
 * equal logits by ascending position, which is ascending id when the ids ascend): a radix sort of
 * just these positions.
 */
export function sortPositionsByRank(candidates: Candidates, positions: Int32Array, count: number): void {
  const { logitBits } = candidates;
  const work = candidates.radix();
  for (let i = 0; i < count; i++) work.keys[i] = ~ascendingKey(logitBits[positions[i]!]!) >>> 0;
  radixSortByKeys(work, count, positions);
}

/** Makes the candidates at positions indices[0..count) the live ones, in that order. */
export function gatherCandidates(candidates: Candidates, indices: Int32Array, count: number): void {
  const { ids, logits, probabilities, scratchIds, scratchLogits, scratchProbabilities } = candidates;
  for (let j = 0; j < count; j++) {
    const source = indices[j]!;
    scratchIds[j] = ids[source]!;
    scratchLogits[j] = logits[source]!;
    scratchProbabilities[j] = probabilities[source]!;
  }
  for (let j = 0; j < count; j++) {
    ids[j] = scratchIds[j]!;
    logits[j] = scratchLogits[j]!;
    probabilities[j] = scratchProbabilities[j]!;
  }
  candidates.length = count;
}

/** Sorts the live candidates (descending logit, ties by ascending id) unless already sorted. */
export function sortCandidates(candidates: Candidates): void {
  if (candidates.sorted) return;
  const length = candidates.length;
  selectTopIndices(candidates, length, candidates.scratchIndices);
  gatherCandidates(candidates, candidates.scratchIndices, length);
  candidates.sorted = true;
}

/**
 * llama.cpp's `llama_sampler_softmax_impl`: probabilities from the logits (sorting first when
 * `sortFirst`), in float32 arithmetic as llama.cpp does it: p = expf(logit - max), summed in a
 * float, each divided by the sum.
 */
export function softmax(candidates: Candidates, sortFirst: boolean): void {
  if (candidates.length < 1) throw new SamplerError("softmax of no candidates");
  if (sortFirst) sortCandidates(candidates);
  const { logits, probabilities, length } = candidates;
  let max = logits[0]!;
  if (!candidates.sorted) for (let i = 1; i < length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < length; i++) {
    const p = Math.fround(Math.exp(Math.fround(logits[i]! - max)));
    probabilities[i] = p;
    sum = Math.fround(sum + p);
  }
  for (let i = 0; i < length; i++) probabilities[i] = probabilities[i]! / sum;
}

/**
 * Sorts indices[0..count), which must be in ascending order on entry, by ascending keys[index]
 * (ties by ascending index). Radix sort when there are many (and `work` is given), insertion sort
 * when few, heapsort otherwise.
 */
export function sortIndicesByKey(indices: Int32Array, keys: Float32Array, count: number, work?: RadixWork): void {
  if (work && count > RADIX_SORT_ABOVE) {
    const bits = work.bitsOf(keys);
    for (let i = 0; i < count; i++) work.keys[i] = ascendingKey(bits[indices[i]!]!);
    radixSortByKeys(work, count, indices);
    return;
  }
  if (count <= 32) {
    for (let i = 1; i < count; i++) {
      const item = indices[i]!;
      let j = i - 1;
      while (j >= 0 && keyBefore(keys, item, indices[j]!)) {
        indices[j + 1] = indices[j]!;
        j--;
      }
      indices[j + 1] = item;
    }
    return;
  }
  // Max-heap under keyBefore, then repeatedly move the maximum to the end.
  for (let i = (count >> 1) - 1; i >= 0; i--) siftIndex(indices, keys, count, i);
  for (let end = count - 1; end > 0; end--) {
    const largest = indices[0]!;
    indices[0] = indices[end]!;
    indices[end] = largest;
    siftIndex(indices, keys, end, 0);
  }
}

function keyBefore(keys: Float32Array, a: number, b: number): boolean {
  return keys[a]! < keys[b]! || (keys[a]! === keys[b]! && a < b);
}

function siftIndex(indices: Int32Array, keys: Float32Array, size: number, position: number): void {
  const item = indices[position]!;
  let parent = position;
  while (true) {
    let child = 2 * parent + 1;
    if (child >= size) break;
    if (child + 1 < size && keyBefore(keys, indices[child]!, indices[child + 1]!)) child++;
    if (!keyBefore(keys, item, indices[child]!)) break;
    indices[parent] = indices[child]!;
    parent = child;
  }
  indices[parent] = item;
}
