import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf } from "./__fixtures__/candidates-from";
import { type LogitsSpec, logitsStream } from "./__fixtures__/golden-logits";
import goldens from "./__fixtures__/llamacpp-sampler-goldens.json";
import { Candidates, softmax } from "./candidates";
import { createSampler, isPlainGreedy, topCandidatesSuffice } from "./sampler";
import { topNSigma } from "./top-n-sigma";

interface TopNSigmaGolden {
  id: string;
  logits: LogitsSpec;
  results: { n: number; kept: number; lowestKept: number; highestMasked: number | null; keptIds?: number[] }[];
}

describe("topNSigma", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (probabilities after top-n-sigma then dist).
  it.each([
    [1, [0, 0, 0.428571, 0.571429]],
    [0, [0.1, 0.2, 0.3, 0.4]], // n = 0 is a no-op (llama.cpp PR #13345), not greedy
    [3, [0.1, 0.2, 0.3, 0.4]],
  ])("matches llama.cpp's test: n = %d → %j", (n, expected) => {
    const candidates = candidatesFromProbabilities([0.1, 0.2, 0.3, 0.4]);
    topNSigma(candidates, n);
    softmax(candidates, false);
    expect(candidates.length).toBe(4);
    Array.from(candidates.probabilities.subarray(0, 4)).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });

  it("masks logits below max − n·σ to -Infinity, leaving every candidate in place; -Infinity logits are left out of the mean and σ", () => {
    // Finite logits 0, 1, 2, 3, 4: mean 2, σ = sqrt(2) ≈ 1.414. n = 1: threshold 2.586.
    const candidates = Candidates.fromLogits([0, -Infinity, 1, 2, -Infinity, 3, 4]);
    topNSigma(candidates, 1);
    expect(Array.from(candidates.logits)).toEqual([-Infinity, -Infinity, -Infinity, -Infinity, -Infinity, 3, 4]);
    expect(idsOf(candidates)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    // n = 1.5: threshold 4 − 2.121 = 1.879 keeps 2.
    const wider = Candidates.fromLogits([0, -Infinity, 1, 2, -Infinity, 3, 4]);
    topNSigma(wider, 1.5);
    expect(Array.from(wider.logits)).toEqual([-Infinity, -Infinity, -Infinity, 2, -Infinity, 3, 4]);
  });

  it("does nothing for n <= 0 or a single candidate", () => {
    for (const n of [-1, 0]) {
      const candidates = Candidates.fromLogits([0, 1, 2, 10]);
      topNSigma(candidates, n);
      expect(Array.from(candidates.logits)).toEqual([0, 1, 2, 10]);
    }
    const single = Candidates.fromLogits([3, -5]);
    single.length = 1;
    topNSigma(single, 0.01);
    expect(single.logits[0]).toBe(3);
  });
});

describe("topNSigma goldens: the candidates llama.cpp's top-n-sigma keeps (tools/llamacpp/sampler-goldens.ts)", () => {
  const cases = goldens.topNSigma as TopNSigmaGolden[];
  it.each(cases.map((c) => [c.id, c] as const))("%s", (_id, c) => {
    const logits = logitsStream(c.logits)();
    for (const golden of c.results) {
      const candidates = Candidates.fromLogits(logits);
      topNSigma(candidates, golden.n);
      const kept = idsOf(candidates).filter((_, i) => candidates.logits[i] !== -Infinity);
      // Survivors are the logits at or above a threshold: the count fixes the set, the ids at its edge check it.
      expect({ n: golden.n, kept: kept.length }).toEqual({ n: golden.n, kept: golden.kept });
      const byLogit = (ids: number[]) => [...ids].sort((a, b) => logits[b]! - logits[a]!);
      expect(byLogit(kept).at(-1)).toBe(golden.lowestKept);
      const masked = byLogit(Array.from(logits.keys()).filter((id) => logits[id] !== -Infinity && candidates.logits[id] === -Infinity));
      expect(masked[0] ?? null).toBe(golden.highestMasked);
      if (golden.keptIds) expect(byLogit(kept)).toEqual(golden.keptIds);
      for (const id of kept) expect(candidates.logits[id]).toBe(logits[id]);
    }
  });
});

describe("the sampler with topNSigma", () => {
  it("applies it before top-k (llama.cpp's default chain): masked tokens are never picked", () => {
    // Finite logits 0, 1, 2, 3, 4 and eight at 0: n = 1 keeps only 3 and 4 whatever top-k keeps.
    const logits = Float32Array.from([0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    const sampler = createSampler({ seed: 8, temperature: 5, topK: 10, topP: 1, minP: 0, topNSigma: 1 }, { vocabularySize: logits.length });
    const picked = new Set(Array.from({ length: 500 }, () => sampler.sample(logits, []).token));
    expect([...picked].sort()).toEqual([3, 4]);
    const without = createSampler({ seed: 8, temperature: 5, topK: 10, topP: 1, minP: 0 }, { vocabularySize: logits.length });
    expect(new Set(Array.from({ length: 500 }, () => without.sample(logits, []).token)).size).toBeGreaterThan(2);
  });

  it("needs the whole logits (its mean and σ read them all) but leaves greedy picks alone", () => {
    expect(topCandidatesSuffice({ topNSigma: 1 }, 100)).toBe(0);
    expect(topCandidatesSuffice({ topNSigma: -1 }, 100)).toBe(40);
    expect(topCandidatesSuffice({ mirostat: { mode: 2 } }, 100)).toBe(0);
    expect(isPlainGreedy({ temperature: 0, topNSigma: 1 })).toBe(true);
    expect(isPlainGreedy({ temperature: 0, mirostat: { mode: 1 }, repeatPenalty: 1.5 })).toBe(true); // mirostat's chain has no penalties
    expect(isPlainGreedy({ temperature: 0, repeatPenalty: 1.5 })).toBe(false);
  });
});
