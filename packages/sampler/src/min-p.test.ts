import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, softmaxOf } from "./__fixtures__/candidates-from";
import { Candidates, sortCandidates } from "./candidates";
import { minP } from "./min-p";

describe("minP", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (min-p with min_keep 0, then dist's softmax).
  const cases: [number, number[]][] = [
    [0.0, [0.1, 0.2, 0.3, 0.4]],
    [0.24, [0.1, 0.2, 0.3, 0.4]],
    [0.26, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]],
    [0.49, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]],
    [0.51, [0.3 / 0.7, 0.4 / 0.7]],
    [0.74, [0.3 / 0.7, 0.4 / 0.7]],
    [0.76, [1.0]],
    [1.0, [1.0]],
    [1.05, [1.0]],
  ];
  it.each(cases)("matches llama.cpp's test on unsorted candidates: p = %d → %j", (p, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    minP(candidates, p, 0);
    expect(candidates.length).toBe(expected.length);
    softmaxOf(candidates).forEach((q, i) => expect(Math.abs(q - expected[i]!)).toBeLessThan(1e-5));
  });

  it.each(cases)("matches llama.cpp's test on sorted candidates: p = %d → %j", (p, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    sortCandidates(candidates);
    minP(candidates, p, 0);
    expect(candidates.length).toBe(expected.length);
    const reversed = [...expected].reverse();
    softmaxOf(candidates).forEach((q, i) => expect(Math.abs(q - reversed[i]!)).toBeLessThan(1e-5));
  });

  it("keeps probability >= p · max (logit >= max + ln p), in order, at least minKeep", () => {
    // p = 0.6: threshold 0.6 · 0.4 = 0.24 → keeps 0.3 and 0.4 (ids 2, 3), token order kept.
    const unsorted = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    minP(unsorted, 0.6, 1);
    expect(idsOf(unsorted)).toEqual([2, 3]);
    // p = 0.76 keeps only 0.4; minKeep 2 falls back to the sorted rule: the 2 best.
    const atLeastTwo = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    minP(atLeastTwo, 0.76, 2);
    expect(idsOf(atLeastTwo)).toEqual([3, 2]);
  });

  it("keeps a token exactly at the threshold (p_i = p · p_max is 'at least')", () => {
    // logits 0 and ln 0.5 (as float32): minLogit = 0 + ln 0.5, equal to the second logit.
    const candidates = Candidates.fromLogits([0, Math.fround(Math.log(0.5))]);
    minP(candidates, 0.5, 1);
    expect(idsOf(candidates)).toEqual([0, 1]);
  });
});
