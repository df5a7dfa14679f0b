import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, testRandom } from "./__fixtures__/candidates-from";
import { Candidates, softmax } from "./candidates";
import { typical } from "./typical";

describe("typical", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (the probabilities typical leaves).
  it.each([
    [[0.97, 0.01, 0.01, 0.01], [0.97]],
    [[0.4, 0.2, 0.2, 0.2], [0.2, 0.2, 0.2]],
  ])("matches llama.cpp's test: %j → %j", (probabilities, expected) => {
    const candidates = candidatesFromProbabilities(probabilities);
    typical(candidates, 0.5, 0);
    expect(candidates.length).toBe(expected.length);
    expected.forEach((p, i) => expect(Math.abs(candidates.probabilities[i]! - p)).toBeLessThan(1e-5));
  });

  it("orders by |−log p − H| and keeps the shortest prefix whose mass exceeds p (hand-computed)", () => {
    // p = 0.5, 0.3, 0.2: H = −(0.5 ln 0.5 + 0.3 ln 0.3 + 0.2 ln 0.2) = 0.34657 + 0.36119 + 0.32189 = 1.02965
    // |−ln p − H|: token 0: |0.69315 − 1.02965| = 0.33650; token 1: |1.20397 − 1.02965| = 0.17432;
    // token 2: |1.60944 − 1.02965| = 0.57979 → order 1, 0, 2 with masses 0.3, 0.8, 1.0.
    const entropy = -(0.5 * Math.log(0.5) + 0.3 * Math.log(0.3) + 0.2 * Math.log(0.2));
    expect(entropy).toBeCloseTo(1.02965, 5);
    const run = (p: number, minKeep: number) => {
      const candidates = candidatesFromProbabilities([0.5, 0.3, 0.2]);
      typical(candidates, p, minKeep);
      return { ids: idsOf(candidates), sorted: candidates.sorted };
    };
    expect(run(0.5, 1)).toEqual({ ids: [1, 0], sorted: false }); // 0.3 is not > 0.5; 0.8 is
    expect(run(0.1, 1).ids).toEqual([1]); // 0.3 > 0.1
    expect(run(0.1, 3).ids).toEqual([1, 0, 2]); // but at least 3
    expect(run(0.85, 1).ids).toEqual([1, 0, 2]); // 0.8 is not > 0.85
    expect(run(1, 1).ids).toEqual([0, 1, 2]); // p = 1: disabled, untouched
  });

  it("leaves banned (-Infinity) candidates out of the entropy", () => {
    // The hand case above plus a banned token: same order 1, 0 (llama.cpp's entropy would be NaN).
    const candidates = Candidates.fromLogits([Math.log(0.5), Math.log(0.3), Math.log(0.2), -Infinity]);
    typical(candidates, 0.5, 1);
    expect(idsOf(candidates)).toEqual([1, 0]);
  });

  it("gives the same tokens on many candidates (radix-sorted scores) as a plain sort", () => {
    const random = testRandom(21);
    const logits = Float32Array.from({ length: 10000 }, () => random() * 12);
    // The same float32 formulas, sorted with Array.prototype.sort.
    const reference = Candidates.fromLogits(logits);
    softmax(reference, true);
    const p = Array.from(reference.probabilities.subarray(0, reference.length));
    let entropy = 0;
    for (const q of p) if (q > 0) entropy = Math.fround(entropy + Math.fround(-q * Math.fround(Math.log(q))));
    const scores = p.map((q) => Math.abs(Math.fround(-Math.fround(Math.log(q)) - entropy)));
    const order = p.map((_, i) => i).sort((a, b) => Math.fround(scores[a]!) - Math.fround(scores[b]!) || a - b);
    let cumulative = 0;
    let keep = order.length;
    for (let i = 0; i < order.length; i++) {
      cumulative = Math.fround(cumulative + p[order[i]!]!);
      if (cumulative > Math.fround(0.9)) {
        keep = i + 1;
        break;
      }
    }
    const expected = order.slice(0, keep).map((i) => reference.ids[i]!);
    const candidates = Candidates.fromLogits(logits);
    typical(candidates, 0.9, 1);
    expect(idsOf(candidates)).toEqual(expected);
  });

  it("needs a mass strictly above p", () => {
    // Two equal logits: p = 0.5 each exactly, both scores 0. A mass of 0.5 is not > 0.5: both stay.
    const candidates = Candidates.fromLogits([1, 1]);
    typical(candidates, 0.5, 1);
    expect(idsOf(candidates)).toEqual([0, 1]);
  });
});
