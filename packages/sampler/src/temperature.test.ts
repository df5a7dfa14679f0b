import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, softmaxOf } from "./__fixtures__/candidates-from";
import { Candidates } from "./candidates";
import { temperature } from "./temperature";

describe("temperature", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (temperature, then dist's softmax).
  it.each([
    [1.0, [0.1, 0.2, 0.3, 0.4]],
    [0.0, [0.0, 0.0, 0.0, 1.0]],
  ])("matches llama.cpp's test: t = %d → %j", (t, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    temperature(candidates, t);
    softmaxOf(candidates).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });

  it("divides logits by t in float32: t = 0.5 squares the probabilities (renormalized)", () => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    temperature(candidates, 0.5);
    // p^2 / Σp^2 = [0.01, 0.04, 0.09, 0.16] / 0.30
    softmaxOf(candidates).forEach((p, i) => expect(p).toBeCloseTo([0.01, 0.04, 0.09, 0.16][i]! / 0.3, 6));
    const exact = Candidates.fromLogits([1, 3]);
    temperature(exact, 0.7);
    expect(Array.from(exact.logits.subarray(0, 2))).toEqual([Math.fround(1 / Math.fround(0.7)), Math.fround(3 / Math.fround(0.7))]);
  });

  it("keeps only the first largest logit when t <= 0", () => {
    const candidates = Candidates.fromLogits([1, 4, 4, 2]);
    temperature(candidates, -1);
    expect(Array.from(candidates.logits.subarray(0, 4))).toEqual([-Infinity, 4, -Infinity, -Infinity]);
    expect(candidates.length).toBe(4);
  });
});
