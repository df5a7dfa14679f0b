import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, softmaxOf } from "./__fixtures__/candidates-from";
import { Candidates, sortCandidates } from "./candidates";
import { applyPenalties } from "./penalties";

const logitsOf = (candidates: Candidates) => Array.from(candidates.logits.subarray(0, candidates.length));

describe("applyPenalties", () => {
  // Logits of tokens 0..4 and a history whose last 4 tokens are [0, 1, 0, 3]:
  // counts 0 → 2, 1 → 1, 3 → 1; token 4 is only before the window.
  const logits = [2, -1, 0.5, 3, 1];
  const history = [4, 0, 1, 0, 3];

  it("applies repeat, frequency and presence penalties over the last N tokens (hand-computed)", () => {
    const candidates = Candidates.fromLogits(logits);
    applyPenalties(candidates, history, { lastN: 4, repeat: 2, frequency: 0.5, presence: 0.25 });
    expect(logitsOf(candidates)).toEqual([
      2 / 2 - (2 * 0.5 + 0.25), // token 0: positive → divided; count 2 → -0.25
      -1 * 2 - (1 * 0.5 + 0.25), // token 1: negative → multiplied; count 1 → -2.75
      0.5, // token 2: not in the window
      3 / 2 - (1 * 0.5 + 0.25), // token 3: 0.75
      1, // token 4: outside the last 4
    ]);
  });

  it("looks at the whole history with lastN = -1 and at nothing with lastN = 0", () => {
    const all = Candidates.fromLogits(logits);
    applyPenalties(all, history, { lastN: -1, repeat: 2, frequency: 0.5, presence: 0.25 });
    expect(all.logits[4]).toBe(1 / 2 - (0.5 + 0.25)); // token 4 now counted once: -0.25
    const none = Candidates.fromLogits(logits);
    applyPenalties(none, history, { lastN: 0, repeat: 2, frequency: 0.5, presence: 0.25 });
    expect(logitsOf(none)).toEqual(logits);
    const neutral = Candidates.fromLogits(logits);
    applyPenalties(neutral, history, { lastN: 64, repeat: 1, frequency: 0, presence: 0 });
    expect(logitsOf(neutral)).toEqual(logits);
  });

  it("leaves a zero logit at 0 under the repeat penalty and still subtracts the presence penalty", () => {
    const candidates = Candidates.fromLogits([0, 1]);
    applyPenalties(candidates, [0], { lastN: 8, repeat: 3, frequency: 0, presence: 0.5 });
    expect(candidates.logits[0]).toBe(-0.5); // 0 * 3 - 0.5
  });

  it("gives the same logits per token on candidates out of token order, and leaves the counts zeroed", () => {
    const inOrder = Candidates.fromLogits(logits);
    const counts = new Int32Array(5);
    applyPenalties(inOrder, history, { lastN: 4, repeat: 2, frequency: 0.5, presence: 0.25 }, counts);
    const shuffled = Candidates.fromLogits(logits);
    sortCandidates(shuffled); // ids [3, 0, 4, 2, 1]
    applyPenalties(shuffled, history, { lastN: 4, repeat: 2, frequency: 0.5, presence: 0.25 }, counts);
    const byId = new Map(idsOf(shuffled).map((id, i) => [id, shuffled.logits[i]]));
    expect([0, 1, 2, 3, 4].map((id) => byId.get(id))).toEqual(logitsOf(inOrder));
    expect(Array.from(counts)).toEqual([0, 0, 0, 0, 0]);
  });

  it("ignores history tokens outside the vocabulary", () => {
    const candidates = Candidates.fromLogits([1, 1]);
    applyPenalties(candidates, [-1, 7, 1], { lastN: 3, repeat: 2, frequency: 0, presence: 0 });
    expect(logitsOf(candidates)).toEqual([1, 0.5]);
  });

  // Expectations of llama.cpp's tests/test-sampling.cpp (penalties, then dist's softmax).
  it.each([
    [[0], [0, 0.25, 0.25, 0.25, 0.25], 50, 0, 0],
    [[0, 1, 2], [0, 0, 0, 0.5, 0.5], 50, 0, 0],
    [[0, 1, 2, 0, 0], [0, 0, 0, 0.5, 0.5], 50, 0, 0],
    [[0], [0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1, 5, 5],
    [[0, 1, 2], [0.000023, 0.000023, 0.000023, 0.499966, 0.499966], 1, 5, 5],
    [[0, 1, 2, 0, 0], [0.0, 0.000023, 0.000023, 0.499977, 0.499977], 1, 5, 5],
  ])("matches llama.cpp's test: history %j → %j", (last, expected, repeat, frequency, presence) => {
    const candidates = candidatesFromProbabilities([0.2, 0.2, 0.2, 0.2, 0.2]);
    applyPenalties(candidates, last, { lastN: 5, repeat, frequency, presence });
    softmaxOf(candidates).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });
});
