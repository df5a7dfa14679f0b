import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, softmaxOf, testRandom } from "./__fixtures__/candidates-from";
import { Candidates, softmax } from "./candidates";
import { topP } from "./top-p";

/** Kept ids the slow way: full sort, then llama.cpp's float32 cumulative rule. */
function naiveTopP(logits: Float32Array, p: number, minKeep: number): number[] {
  const candidates = Candidates.fromLogits(logits);
  softmax(candidates, false);
  const order = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
  let cumulative = 0;
  for (let i = 0; i < order.length; i++) {
    cumulative = Math.fround(cumulative + candidates.probabilities[order[i]!]!);
    if (cumulative >= Math.fround(p) && i + 1 >= minKeep) return order.slice(0, i + 1);
  }
  return order;
}

describe("topP", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (top-p with min_keep 0, then dist's softmax).
  it.each([
    [0, [1.0]],
    [0.7, [0.571429, 0.428571]],
    [0.8, [0.44444, 0.33333, 0.22222]],
    [1.0, [0.1, 0.2, 0.3, 0.4]],
  ])("matches llama.cpp's test: p = %d → %j", (p, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    topP(candidates, p, 0);
    expect(candidates.length).toBe(expected.length);
    softmaxOf(candidates).forEach((q, i) => expect(Math.abs(q - expected[i]!)).toBeLessThan(1e-5));
  });

  it("keeps the smallest prefix reaching p, at least minKeep (hand-computed)", () => {
    // probabilities sorted: 0.4, 0.3, 0.2, 0.1 → cumulative 0.4, 0.7, 0.9, 1.0
    const run = (p: number, minKeep: number) => {
      const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
      topP(candidates, p, minKeep);
      return idsOf(candidates);
    };
    expect(run(0.4, 1)).toEqual([3]); // 0.4 >= 0.4
    expect(run(0.5, 1)).toEqual([3, 2]); // 0.7 >= 0.5
    expect(run(0.5, 3)).toEqual([3, 2, 1]); // minKeep 3
    expect(run(0.95, 1)).toEqual([3, 2, 1, 0]);
  });

  it("gives the same set as a full sort on many candidates, however far the prefix reaches", () => {
    const random = testRandom(8);
    for (const [count, spread, p] of [
      [5000, 30, 0.9], // a peaked distribution: found among the top 256
      [5000, 2, 0.95], // flatter: beyond 256 and 2048, needs the full sort
      [151936, 6, 0.95],
      [151936, 6, 0.5],
      [151936, 6, 0.999], // the buckets' margin cannot fit below 1: the full sort
      [151936, 0.001, 0.9], // nearly flat: every bucket holds many
    ] as const) {
      const logits = Float32Array.from({ length: count }, () => random() * spread);
      const candidates = Candidates.fromLogits(logits);
      topP(candidates, p, 1);
      expect(idsOf(candidates)).toEqual(naiveTopP(logits, p, 1));
      expect(candidates.sorted).toBe(true);
    }
  });

  it("the bucket search gives the full sort's prefix: a model-like vocabulary, ties, banned tokens, minKeep", () => {
    const random = testRandom(21);
    const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    const cases: [string, Float32Array, number, number][] = [];
    const modelLike = Float32Array.from({ length: 151936 }, () => 3 * normal());
    for (let j = 0; j < 8; j++) modelLike[Math.floor(random() * modelLike.length)] = 10 + 5 * random();
    cases.push(["normal logits with a few high ones (the sampler benchmark's)", modelLike, 0.95, 1]);
    cases.push(["many equal logits", Float32Array.from({ length: 50000 }, () => Math.round(random() * 6)), 0.9, 1]);
    const banned = Float32Array.from({ length: 50000 }, () => random() * 3);
    for (let i = 0; i < banned.length; i += 3) banned[i] = Number.NEGATIVE_INFINITY;
    cases.push(["a third banned (-Infinity)", banned, 0.8, 1]);
    cases.push(["minKeep beyond the prefix", Float32Array.from({ length: 50000 }, () => random() * 3), 0.3, 20000]);
    for (const [name, logits, p, minKeep] of cases) {
      const candidates = Candidates.fromLogits(logits);
      topP(candidates, p, minKeep);
      expect(idsOf(candidates), name).toEqual(naiveTopP(logits, p, minKeep));
    }
  });
});
