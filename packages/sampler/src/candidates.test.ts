import { describe, expect, it } from "vitest";
import { idsOf, testRandom } from "./__fixtures__/candidates-from";
import { Candidates, selectTopIndices, softmax, sortCandidates, sortIndicesByKey } from "./candidates";

/** Positions sorted the slow, obvious way: descending logit, equal logits by ascending id. */
function naiveOrder(candidates: Candidates): number[] {
  const positions = Array.from({ length: candidates.length }, (_, i) => i);
  const { logits, ids } = candidates;
  return positions.sort((a, b) => logits[b]! - logits[a]! || ids[a]! - ids[b]! || 0);
}

function randomLogits(count: number, seed: number, options: { ties?: boolean; infinities?: boolean } = {}): Float32Array {
  const random = testRandom(seed);
  const logits = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    logits[i] = options.ties ? Math.floor(random() * 8) - 4 : (random() - 0.5) * 40;
    if (options.infinities && random() < 0.05) logits[i] = -Infinity;
  }
  return logits;
}

describe("Candidates", () => {
  it("loads logits as token-ordered candidates and rejects a wrong length", () => {
    const candidates = new Candidates(4).load(new Float32Array([0.5, -1, 2]));
    expect(candidates.toArray().map(({ id, logit }) => [id, logit])).toEqual([
      [0, 0.5],
      [1, -1],
      [2, 2],
    ]);
    expect(candidates.sorted).toBe(false);
    expect(() => candidates.load(new Float32Array(5))).toThrow(/expected 1 to 4/);
    expect(() => candidates.load(new Float32Array(0))).toThrow(/expected 1 to 4/);
  });

  it("restores token order on every load after a step reordered them", () => {
    const candidates = new Candidates(3).load([1, 3, 2]);
    sortCandidates(candidates);
    expect(idsOf(candidates)).toEqual([1, 2, 0]);
    candidates.load([1, 3, 2]);
    expect(idsOf(candidates)).toEqual([0, 1, 2]);
  });
});

describe("selectTopIndices", () => {
  it("selects the k best, best first, equal logits by ascending id", () => {
    const candidates = Candidates.fromLogits([1, 5, 3, 5, -2, 3]);
    const out = new Int32Array(6);
    selectTopIndices(candidates, 4, out);
    // 5 (id 1), 5 (id 3), 3 (id 2), 3 (id 5)
    expect(Array.from(out.subarray(0, 4))).toEqual([1, 3, 2, 5]);
  });

  it("agrees with a full sort for every k, with ties and -Infinity", () => {
    for (const [count, seed, ties, infinities] of [
      [50, 1, false, false],
      [300, 2, true, false],
      [300, 3, false, true],
    ] as const) {
      const candidates = Candidates.fromLogits(randomLogits(count, seed, { ties, infinities }));
      const expected = naiveOrder(candidates);
      const out = new Int32Array(count);
      for (const k of [1, 2, 7, 40, count - 1, count]) {
        selectTopIndices(candidates, k, out);
        expect(Array.from(out.subarray(0, k))).toEqual(expected.slice(0, k));
      }
    }
  });

  it("uses the radix sort on many candidates with the same order, shuffled ids included", () => {
    const count = 20000;
    const candidates = Candidates.fromLogits(randomLogits(count, 4, { ties: true, infinities: true }));
    candidates.logits[10] = -0; // equal to +0: ranks by id
    candidates.logits[11] = 0;
    candidates.logits[9] = 0;
    const out = new Int32Array(count);
    selectTopIndices(candidates, count, out); // k > length / 16: radix
    expect(Array.from(out)).toEqual(naiveOrder(candidates));
    // Reverse the ids so that positions are not in id order: the radix sort orders by id first.
    candidates.ids.reverse();
    selectTopIndices(candidates, count / 2, out);
    expect(Array.from(out.subarray(0, count / 2))).toEqual(naiveOrder(candidates).slice(0, count / 2));
  });
});

describe("sortCandidates and softmax", () => {
  it("sorts in place, descending", () => {
    const candidates = Candidates.fromLogits([0.1, 0.4, 0.2, 0.3]);
    sortCandidates(candidates);
    expect(idsOf(candidates)).toEqual([1, 3, 2, 0]);
    expect(candidates.sorted).toBe(true);
  });

  it("computes p = exp(logit - max) / sum, sorting first when asked", () => {
    // logits ln 1, ln 2, ln 3, ln 4: probabilities 0.1, 0.2, 0.3, 0.4
    const candidates = Candidates.fromLogits([0, Math.log(2), Math.log(3), Math.log(4)]);
    softmax(candidates, false);
    expect(idsOf(candidates)).toEqual([0, 1, 2, 3]);
    Array.from(candidates.probabilities.subarray(0, 4)).forEach((p, i) => expect(p).toBeCloseTo([0.1, 0.2, 0.3, 0.4][i]!, 6));
    softmax(candidates, true);
    expect(idsOf(candidates)).toEqual([3, 2, 1, 0]);
    Array.from(candidates.probabilities.subarray(0, 4)).forEach((p, i) => expect(p).toBeCloseTo([0.4, 0.3, 0.2, 0.1][i]!, 6));
  });
});

describe("sortIndicesByKey", () => {
  it("sorts ascending with ties by index, the same on every path (insertion, heap, radix)", () => {
    for (const count of [20, 1000, 10000]) {
      const random = testRandom(count);
      const keys = Float32Array.from({ length: count }, () => Math.floor(random() * 50) / 7);
      const indices = Int32Array.from({ length: count }, (_, i) => i);
      const expected = Array.from(indices).sort((a, b) => keys[a]! - keys[b]! || a - b);
      const work = new Candidates(count).radix();
      sortIndicesByKey(indices, keys, count, work);
      expect(Array.from(indices)).toEqual(expected);
    }
  });
});
