import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, testRandom } from "./__fixtures__/candidates-from";
import { Candidates } from "./candidates";
import { pickDistribution, pickGreedy } from "./pick";
import { SeededRandom } from "./seeded-random";

/** A random source whose doubles are given (to test the selection rule). */
const fixedDouble = (value: number) => ({ nextDouble: () => value }) as unknown as SeededRandom;

describe("pickGreedy", () => {
  it("picks the first largest logit with its log-probability under the candidates' softmax", () => {
    // logits 0, ln 3: probabilities 0.25, 0.75
    const result = pickGreedy(Candidates.fromLogits([0, Math.log(3)]));
    expect(result.token).toBe(1);
    expect(result.logprob).toBeCloseTo(Math.log(0.75), 6);
    expect(pickGreedy(Candidates.fromLogits([1, 5, 5])).token).toBe(1);
  });

  it("refuses when every candidate is banned", () => {
    expect(() => pickGreedy(Candidates.fromLogits([-Infinity, -Infinity]))).toThrow(/every candidate has logit -Infinity/);
  });
});

describe("pickDistribution", () => {
  it("picks the first candidate at which the running sum reaches u · sum (llama.cpp's dist)", () => {
    // probabilities 0.1, 0.2, 0.3, 0.4: running sums 0.1, 0.3, 0.6, 1.0
    const pick = (u: number) => pickDistribution(candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]), fixedDouble(u));
    expect(pick(0.05).token).toBe(0);
    expect(pick(0.29).token).toBe(1);
    expect(pick(0.35).token).toBe(2);
    expect(pick(0.99).token).toBe(3);
    expect(pick(0.35).logprob).toBeCloseTo(Math.log(0.3), 6);
  });

  it("never picks a candidate with probability 0, even when u is 0", () => {
    const candidates = Candidates.fromLogits([-Infinity, -Infinity, 1, 2]);
    expect(pickDistribution(candidates, fixedDouble(0)).token).toBe(2);
    expect(() => pickDistribution(Candidates.fromLogits([-Infinity, -Infinity]), new SeededRandom(1))).toThrow(/every candidate/);
  });

  it("takes a single candidate without drawing", () => {
    const random = new SeededRandom(9);
    const candidates = Candidates.fromLogits([3, 7]);
    candidates.length = 1;
    expect(pickDistribution(candidates, random)).toEqual({ token: 0, logprob: 0 });
    expect(random.nextUint32()).toBe(new SeededRandom(9).nextUint32());
  });

  it("leaves normalized probabilities", () => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    pickDistribution(candidates, new SeededRandom(1));
    Array.from(candidates.probabilities.subarray(0, 4)).forEach((p, i) => expect(p).toBeCloseTo([0.1, 0.2, 0.3, 0.4][i]!, 6));
  });

  it("draws with the softmax's frequencies: 20,000 seeded draws", () => {
    const random = new SeededRandom(2024);
    const counts = [0, 0, 0, 0];
    const draws = 20000;
    for (let i = 0; i < draws; i++) counts[pickDistribution(candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]), random).token]!++;
    // Standard deviation of a frequency: sqrt(p(1-p)/n) <= 0.0035; allow 0.012 (> 3.4 sigma).
    counts.forEach((count, i) => expect(Math.abs(count / draws - [0.1, 0.2, 0.3, 0.4][i]!)).toBeLessThan(0.012));
  });

  it("passes a chi-square test over 50 tokens of random logits: 20,000 seeded draws", () => {
    const generate = testRandom(77);
    const logits = Float32Array.from({ length: 50 }, () => generate() * 4);
    const max = Math.max(...logits);
    const weights = Array.from(logits, (logit) => Math.exp(logit - max));
    const total = weights.reduce((a, b) => a + b, 0);
    const expected = weights.map((w) => w / total);
    const random = new SeededRandom(31337);
    const candidates = new Candidates(50);
    const counts = new Array<number>(50).fill(0);
    const draws = 20000;
    for (let i = 0; i < draws; i++) counts[pickDistribution(candidates.load(logits), random).token]!++;
    const chiSquare = counts.reduce((sum, count, i) => sum + (count - draws * expected[i]!) ** 2 / (draws * expected[i]!), 0);
    // 49 degrees of freedom: the 0.999 quantile is 85.35.
    expect(chiSquare).toBeLessThan(85.35);
  });
});
