import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, testRandom } from "./__fixtures__/candidates-from";
import { type LogitsSpec, logitsStream } from "./__fixtures__/golden-logits";
import goldens from "./__fixtures__/llamacpp-sampler-goldens.json";
import { Candidates } from "./candidates";
import { MIROSTAT_M, mirostat, mirostatInitialMu, mirostatUpdate, mirostatV2 } from "./mirostat";
import { pickDistribution } from "./pick";
import { createSampler } from "./sampler";
import { SeededRandom } from "./seeded-random";
import { temperature } from "./temperature";

interface MirostatGolden {
  id: string;
  mode: number;
  logits: LogitsSpec;
  temperature: number;
  tau: number;
  eta: number;
  m: number;
  initialMu: number;
  tokens: number[];
  kept: number[];
  mu: number[];
}

const probabilitiesOf = (candidates: Candidates) => Array.from(candidates.probabilities.subarray(0, candidates.length));

describe("mirostat goldens: llama.cpp's picks forced, memra's kept sets and mu step by step (tools/llamacpp/sampler-goldens.ts)", () => {
  const cases = goldens.mirostat as MirostatGolden[];

  it("has trajectories of both versions", () => {
    expect(cases.filter((c) => c.mode === 1).length).toBeGreaterThanOrEqual(5);
    expect(cases.filter((c) => c.mode === 2).length).toBeGreaterThanOrEqual(5);
  });

  it.each(cases.map((c) => [c.id, c] as const))("%s", (_id, c) => {
    expect(c.m).toBe(MIROSTAT_M);
    let mu = mirostatInitialMu(c.tau);
    expect(mu).toBe(c.initialMu);
    const next = logitsStream(c.logits);
    const candidates = new Candidates(c.logits.vocabularySize);
    for (let step = 0; step < c.tokens.length; step++) {
      candidates.load(next());
      temperature(candidates, c.temperature);
      if (c.mode === 1) mirostat(candidates, mu, c.logits.vocabularySize);
      else mirostatV2(candidates, mu);
      expect({ step, kept: candidates.length }).toEqual({ step, kept: c.kept[step] });
      const position = idsOf(candidates).indexOf(c.tokens[step]!);
      expect({ step, position: position >= 0 }).toEqual({ step, position: true });
      mu = mirostatUpdate(mu, c.tau, c.eta, candidates.probabilities[position]!);
      // Float32 logf/log2f/powf of JavaScript (correctly rounded) and of glibc may differ in the last
      // bit: 682 of the 700 values are equal, the others 1 ulp apart.
      expect({ step, mu: Math.abs(mu - c.mu[step]!) <= 4e-7 * Math.abs(c.mu[step]!) }).toEqual({ step, mu: true });
    }
  });
});

describe("mirostatV2", () => {
  it("keeps the candidates up to the first whose surprise −log2 p exceeds mu, at least one, renormalized", () => {
    // Surprises of 0.4, 0.3, 0.2, 0.1: 1.32, 1.74, 2.32, 3.32 bits.
    const cut = (mu: number) => {
      const candidates = candidatesFromProbabilities([0.1, 0.4, 0.2, 0.3]);
      mirostatV2(candidates, mu);
      return { ids: idsOf(candidates), probabilities: probabilitiesOf(candidates) };
    };
    expect(cut(2).ids).toEqual([1, 3]);
    cut(2).probabilities.forEach((p, i) => expect(p).toBeCloseTo([4 / 7, 3 / 7][i]!, 6));
    expect(cut(2.4).ids).toEqual([1, 3, 2]);
    expect(cut(10).ids).toEqual([1, 3, 2, 0]);
    expect(cut(0.5)).toEqual({ ids: [1], probabilities: [1] });
  });
});

describe("mirostat (1.0)", () => {
  it("keeps k = (ε·2^mu / (1 − N^−ε))^(1/s) candidates for Zipf probabilities of exponent s", () => {
    // p_i ∝ (i+1)^−s: the least-squares estimate of s is exact (b_i = s·t_i).
    const s = 1.2;
    const probabilities = Array.from({ length: 300 }, (_, i) => (i + 1) ** -s);
    for (const [mu, vocabulary] of [
      [6, 1000],
      [9, 50000],
      [4, 300],
    ] as const) {
      const candidates = candidatesFromProbabilities(probabilities);
      mirostat(candidates, mu, vocabulary);
      const epsilon = s - 1;
      const k = ((epsilon * 2 ** mu) / (1 - vocabulary ** -epsilon)) ** (1 / s);
      expect(Math.abs(candidates.length - Math.floor(k))).toBeLessThanOrEqual(1); // s is estimated in float32
      expect(idsOf(candidates)).toEqual(Array.from({ length: candidates.length }, (_, i) => i));
      expect(probabilitiesOf(candidates).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    }
  });

  it("keeps one candidate where k is not a number or overflows an int (llama.cpp's int(k) on x86-64)", () => {
    // Nearly flat: s ≈ 0, so k = (…)^(1/s) overflows.
    const flat = Candidates.fromLogits(Float32Array.from({ length: 500 }, (_, i) => 1e-3 * Math.sin(i)));
    mirostat(flat, 10, 500);
    expect(flat.length).toBe(1);
    expect(flat.ids[0]).toBe(Array.from({ length: 500 }, (_, i) => Math.sin(i)).reduce((best, v, i, a) => (v > a[best]! ? i : best), 0));
    // A single candidate: no pair to estimate s from, s = 0/0.
    const single = Candidates.fromLogits([0.5]);
    mirostat(single, 10, 100);
    expect(single.length).toBe(1);
  });
});

describe("mirostatUpdate", () => {
  it("moves mu by eta · (tau − surprise), in float32", () => {
    expect(mirostatUpdate(10, 5, 0.1, 0.25)).toBe(Math.fround(10 - Math.fround(0.1) * -3)); // surprise 2 bits
    expect(mirostatUpdate(10, 5, 0.1, 1 / 1024)).toBe(Math.fround(10 - Math.fround(Math.fround(0.1) * 5))); // surprise 10 bits
    expect(mirostatInitialMu(5)).toBe(10);
    expect(mirostatInitialMu(0.1)).toBe(Math.fround(2 * Math.fround(0.1)));
  });
});

describe("the sampler with mirostat", () => {
  const vocabulary = 3000;
  const steps = (count: number, seed: number) => {
    const next = logitsStream({ kind: "zipf", vocabularySize: vocabulary, seed, parameter: 1.1 });
    return Array.from({ length: count }, () => next());
  };

  it.each([1, 2] as const)("v%d: temperature → mirostat → pick, mu carried from pick to pick and back to 2·tau on reset", (mode) => {
    const options = { temperature: 0.9, seed: 77, mirostat: { mode, tau: 4, eta: 0.2 } };
    const sampler = createSampler(options, { vocabularySize: vocabulary });
    const logits = steps(40, 5);
    // The same chain from the exported functions, with mu kept here.
    const random = new SeededRandom(77, 0);
    const candidates = new Candidates(vocabulary);
    let mu = mirostatInitialMu(4);
    const expected = logits.map((step) => {
      candidates.load(step);
      temperature(candidates, 0.9);
      if (mode === 1) mirostat(candidates, mu, vocabulary);
      else mirostatV2(candidates, mu);
      const probabilities = probabilitiesOf(candidates);
      const ids = idsOf(candidates);
      const result = pickDistribution(candidates, random);
      mu = mirostatUpdate(mu, 4, 0.2, probabilities[ids.indexOf(result.token)]!);
      return result;
    });
    const sampled = logits.map((step) => sampler.sample(step, []));
    expect(sampled).toEqual(expected);
    sampler.reset();
    expect(logits.map((step) => sampler.sample(step, []))).toEqual(expected);
    // A mu that did not learn (a fresh sampler at each step) picks other tokens.
    const unlearned = logits.map((step) => createSampler(options, { vocabularySize: vocabulary }).sample(step, []).token);
    expect(unlearned).not.toEqual(expected.map((result) => result.token));
  });

  it("replaces the rest of the chain as llama.cpp does: penalties, DRY, top-nσ, top-k, top-p, min-p, typical and XTC have no effect; logit bias has", () => {
    const logits = steps(30, 9);
    const history = [1, 2, 3, 1, 2, 3, 1, 2, 3];
    const run = (extra: object) => {
      const sampler = createSampler({ seed: 3, mirostat: { mode: 2 }, ...extra }, { vocabularySize: vocabulary, tokenText: (id) => `t${id}` });
      return logits.map((step) => sampler.sample(step, history).token);
    };
    const plain = run({});
    expect(
      run({ topK: 1, topP: 0.1, minP: 0.5, typicalP: 0.2, topNSigma: 0.1, repeatPenalty: 2, presencePenalty: 1, dry: { multiplier: 1 }, xtc: { probability: 1, threshold: 0.01 } }),
    ).toEqual(plain);
    const banned = plain[0]!;
    expect(run({ logitBias: { [banned]: -Infinity } })).not.toContain(banned);
  });

  it("at temperature 0 picks the largest logit, as llama.cpp's temperature 0 then mirostat does", () => {
    const logits = steps(10, 4);
    for (const mode of [1, 2] as const) {
      const sampler = createSampler({ temperature: 0, mirostat: { mode } }, { vocabularySize: vocabulary });
      for (const step of logits) {
        const best = step.indexOf(Math.max(...step));
        expect(sampler.sample(step, []).token).toBe(best);
      }
    }
  });

  it.each([1, 2] as const)("v%d: steers the mean surprise of 2,000 picks to tau (3 bits; over 6 without mirostat)", (mode) => {
    // Σ (surprise − tau) = (mu₀ − mu_T) / eta exactly, so the mean is off tau by |mu₀ − mu_T| / (eta·T):
    // at most 0.25 bits for a mu that stays within 50 bits of where it started.
    const tau = 3;
    const size = 1000;
    const sampler = createSampler({ temperature: 1, seed: 2024, mirostat: { mode, tau, eta: 0.1 } }, { vocabularySize: size });
    const free = createSampler({ temperature: 1, seed: 2024, topK: 0, topP: 1, minP: 0 }, { vocabularySize: size });
    const next = logitsStream({ kind: "zipf", vocabularySize: size, seed: 31, parameter: 1.1 });
    let surprise = 0;
    let freeSurprise = 0;
    const count = 2000;
    for (let i = 0; i < count; i++) {
      const logits = next();
      surprise += -sampler.sample(logits, []).logprob / Math.LN2;
      freeSurprise += -free.sample(logits, []).logprob / Math.LN2;
    }
    expect(Math.abs(surprise / count - tau)).toBeLessThan(0.25);
    expect(freeSurprise / count).toBeGreaterThan(6);
  });
});

describe("mirostat's draw", () => {
  it.each([1, 2] as const)("v%d: 20,000 seeded draws fall in the kept set with its softmax's frequencies (chi-square)", (mode) => {
    // Zipf-like probabilities over 400 tokens; mu = 7 bits keeps about 20 of them.
    const generate = testRandom(91);
    const logits = Float32Array.from({ length: 400 }, (_, i) => -1.1 * Math.log(i + 1) + 0.2 * generate());
    const candidates = new Candidates(400);
    const truncate = () => {
      candidates.load(logits);
      if (mode === 1) mirostat(candidates, 7, 400);
      else mirostatV2(candidates, 7);
    };
    truncate();
    const kept = idsOf(candidates);
    const expected = probabilitiesOf(candidates);
    expect(kept.length).toBeGreaterThan(4);
    expect(kept.length).toBeLessThan(60);
    const random = new SeededRandom(4242);
    const counts = new Map<number, number>();
    const draws = 20000;
    for (let i = 0; i < draws; i++) {
      truncate();
      const token = pickDistribution(candidates, random).token;
      counts.set(token, (counts.get(token) ?? 0) + 1);
    }
    expect([...counts.keys()].every((token) => kept.includes(token))).toBe(true);
    // Pool the candidates expected fewer than 5 times into one cell (the test's usual rule).
    let chiSquare = 0;
    let cells = 0;
    let pooledCount = 0;
    let pooledExpected = 0;
    kept.forEach((token, i) => {
      const e = draws * expected[i]!;
      const c = counts.get(token) ?? 0;
      if (e < 5) {
        pooledCount += c;
        pooledExpected += e;
        return;
      }
      chiSquare += (c - e) ** 2 / e;
      cells++;
    });
    if (pooledExpected > 0) {
      chiSquare += (pooledCount - pooledExpected) ** 2 / pooledExpected;
      cells++;
    }
    // d + 3.1·sqrt(2d) + 10 is above the 0.999 quantile of chi-square with d <= 60 degrees of freedom
    // (d = 1: 10.8 < 15.4; 10: 29.6 < 33.9; 30: 59.7 < 64.0; 60: 99.6 < 104.0): a correct draw fails
    // for fewer than 1 seed in 1,000.
    const freedom = cells - 1;
    expect(chiSquare).toBeLessThan(freedom + 3.1 * Math.sqrt(2 * freedom) + 10);
  });
});
