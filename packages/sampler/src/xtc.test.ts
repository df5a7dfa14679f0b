import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf } from "./__fixtures__/candidates-from";
import { SeededRandom } from "./seeded-random";
import { xtc } from "./xtc";

const probabilitiesOf = (candidates: ReturnType<typeof candidatesFromProbabilities>) => Array.from(candidates.probabilities.subarray(0, candidates.length));

describe("xtc", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (probabilities XTC leaves); probability 1
  // here so that the coin always says yes.
  it.each([
    [0.09, [0.1]],
    [0.19, [0.2, 0.1]],
    [0.29, [0.3, 0.2, 0.1]],
    [0.39, [0.4, 0.3, 0.2, 0.1]], // only one token above the threshold: nothing removed
  ])("matches llama.cpp's test: threshold %d → %j", (threshold, expected) => {
    const candidates = candidatesFromProbabilities([0.4, 0.3, 0.2, 0.1]);
    xtc(candidates, 1, threshold, new SeededRandom(0), 0);
    expect(candidates.length).toBe(expected.length);
    probabilitiesOf(candidates).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });

  it("removes all but the least likely of the tokens at or above the threshold, keeping minKeep", () => {
    // threshold 0.15: 0.4, 0.3, 0.2 are above; the least likely of them (0.2, id 2) stays.
    const candidates = candidatesFromProbabilities([0.4, 0.3, 0.2, 0.1]);
    xtc(candidates, 1, 0.15, new SeededRandom(0), 1);
    expect(idsOf(candidates)).toEqual([2, 3]);
    // threshold 0.09 would leave 1 candidate; minKeep 2 forbids it.
    const kept = candidatesFromProbabilities([0.4, 0.3, 0.2, 0.1]);
    xtc(kept, 1, 0.09, new SeededRandom(0), 2);
    expect(kept.length).toBe(4);
  });

  it("acts when the seeded float draw is at most `probability`, and draws whenever enabled", () => {
    // SeededRandom(42, 1)'s first float is 0.776849627 (see seeded-random.test.ts).
    const acts = (probability: number) => {
      const candidates = candidatesFromProbabilities([0.4, 0.3, 0.2, 0.1]);
      const random = new SeededRandom(42, 1);
      xtc(candidates, probability, 0.15, random, 1);
      return { length: candidates.length, nextDraw: random.nextFloat32() };
    };
    const secondDraw = Math.fround(0.853494227);
    expect(acts(0.7)).toEqual({ length: 4, nextDraw: secondDraw }); // 0.7768 > 0.7: no, but drew
    expect(acts(0.8)).toEqual({ length: 2, nextDraw: secondDraw }); // 0.7768 <= 0.8: removes
  });

  it("does nothing and draws nothing when disabled or with fewer than 2 candidates", () => {
    for (const [probability, threshold, probabilities] of [
      [0, 0.1, [0.4, 0.3, 0.2, 0.1]],
      [1, 0.51, [0.4, 0.3, 0.2, 0.1]],
      [1, 0.1, [1]],
    ] as const) {
      const candidates = candidatesFromProbabilities([...probabilities]);
      const random = new SeededRandom(3);
      xtc(candidates, probability, threshold, random, 1);
      expect(candidates.length).toBe(probabilities.length);
      expect(random.nextUint32()).toBe(new SeededRandom(3).nextUint32());
    }
  });
});
