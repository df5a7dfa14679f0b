import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, softmaxOf, testRandom } from "./__fixtures__/candidates-from";
import { Candidates } from "./candidates";
import { topK } from "./top-k";

describe("topK", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (top-k, then dist's softmax).
  it.each([
    [1, [1.0]],
    [3, [0.44444, 0.33333, 0.22222]],
    [4, [0.4, 0.3, 0.2, 0.1]],
    [0, [0.1, 0.2, 0.3, 0.4]],
  ])("matches llama.cpp's test: k = %d → %j", (k, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    topK(candidates, k);
    expect(candidates.length).toBe(expected.length);
    softmaxOf(candidates).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });

  it("keeps the k largest, sorted, equal logits by ascending id; k larger than the candidates keeps all", () => {
    const candidates = Candidates.fromLogits([0.5, 2, -1, 2, 1]);
    topK(candidates, 3);
    expect(idsOf(candidates)).toEqual([1, 3, 4]); // 2 (id 1), 2 (id 3), 1 (id 4)
    expect(candidates.sorted).toBe(true);
    const all = Candidates.fromLogits([0.5, 2, -1]);
    topK(all, 10);
    expect(idsOf(all)).toEqual([1, 0, 2]);
    const disabled = Candidates.fromLogits([0.5, 2, -1]);
    topK(disabled, -1);
    expect(idsOf(disabled)).toEqual([0, 1, 2]);
    expect(disabled.sorted).toBe(false);
  });

  it("selects the same tokens as a full sort on a vocabulary-sized input", () => {
    const random = testRandom(3);
    const logits = Float32Array.from({ length: 151936 }, () => random() * 30);
    const expected = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, 40);
    const candidates = Candidates.fromLogits(logits);
    topK(candidates, 40);
    expect(idsOf(candidates)).toEqual(expected);
  });
});
