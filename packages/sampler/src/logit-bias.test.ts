import { describe, expect, it } from "vitest";
import { idsOf } from "./__fixtures__/candidates-from";
import { Candidates, sortCandidates } from "./candidates";
import { PreparedLogitBias, applyLogitBias } from "./logit-bias";

describe("applyLogitBias", () => {
  it("adds each bias to its token's logit; -Infinity bans", () => {
    const candidates = Candidates.fromLogits([1, 2, 3]);
    applyLogitBias(candidates, { 0: 0.5, 2: -Infinity });
    // 1 + 0.5 = 1.5; token 1 untouched; 3 + -inf = -inf
    expect(Array.from(candidates.logits.subarray(0, 3))).toEqual([1.5, 2, -Infinity]);
  });

  it("takes a Map and a prepared bias the same way, in float32", () => {
    const fromMap = Candidates.fromLogits([0.1, 0.2]);
    applyLogitBias(fromMap, new Map([[1, 0.7]]));
    const prepared = Candidates.fromLogits([0.1, 0.2]);
    applyLogitBias(prepared, new PreparedLogitBias(new Map([[1, 0.7]])));
    // float32 addition: fround(fround(0.2) + fround(0.7))
    expect(fromMap.logits[1]).toBe(Math.fround(Math.fround(0.2) + Math.fround(0.7)));
    expect(prepared.logits[1]).toBe(fromMap.logits[1]);
    expect(fromMap.logits[0]).toBe(Math.fround(0.1));
  });

  it("finds tokens that are no longer at their position, and ignores tokens that are not candidates", () => {
    const candidates = Candidates.fromLogits([1, 3, 2]);
    sortCandidates(candidates); // ids [1, 2, 0]
    candidates.length = 2; // token 0 dropped
    applyLogitBias(candidates, { 2: 10, 0: 5, 7: 1 });
    expect(idsOf(candidates)).toEqual([1, 2]);
    // token 1 keeps 3, token 2: 2 + 10 = 12
    expect(Array.from(candidates.logits.subarray(0, 2))).toEqual([3, 12]);
  });
});
