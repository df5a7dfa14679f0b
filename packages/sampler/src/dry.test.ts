import { describe, expect, it } from "vitest";
import { candidatesFromProbabilities, idsOf, softmaxOf, testRandom } from "./__fixtures__/candidates-from";
import { Candidates, sortCandidates } from "./candidates";
import { type DryOptions, DrySequenceBreakers, applyDry } from "./dry";

const options = (overrides: Partial<DryOptions>): DryOptions => ({
  multiplier: 1,
  base: 2,
  allowedLength: 2,
  penaltyLastN: -1,
  sequenceBreakers: DrySequenceBreakers.none,
  ...overrides,
});

/** Logit change of each token after DRY on all-zero logits. */
function penalties(vocabulary: number, history: number[], dryOptions: DryOptions): number[] {
  const candidates = Candidates.fromLogits(new Float32Array(vocabulary));
  applyDry(candidates, history, dryOptions);
  return Array.from(candidates.logits.subarray(0, vocabulary), (logit) => -logit + 0);
}

describe("applyDry", () => {
  // Expectations of llama.cpp's tests/test-sampling.cpp (DRY, then dist's softmax), with the
  // breakers given as token sequences (llama_sampler_init_dry_testing).
  it.each([
    [[0.25, 0.25, 0.25, 0.25], [0, 1], [0.25, 0.25, 0.25, 0.25], 1.0, 1.1, 2, 4, []],
    [[0.25, 0.25, 0.25, 0.25], [0, 1, 2, 0, 1], [0.296923, 0.296923, 0.109232, 0.296923], 1.0, 1.1, 2, 5, []],
    [[0.2, 0.2, 0.2, 0.2, 0.2], [0, 1, 3, 4, 0, 1], [0.2, 0.2, 0.2, 0.2, 0.2], 1.0, 1.1, 2, 6, [[3]]],
    [[0.2, 0.2, 0.2, 0.2, 0.2], [0, 1, 2, 0, 1], [0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 1.1, 2, 5, []],
    [[0.2, 0.2, 0.2, 0.2, 0.2], [0, 1, 2, 3, 4, 0, 1], [0.2, 0.2, 0.2, 0.2, 0.2], 1.0, 1.1, 4, 7, []],
  ])("matches llama.cpp's test: %j after %j", (probabilities, history, expected, multiplier, base, allowedLength, lastN, breakers) => {
    const candidates = candidatesFromProbabilities(probabilities);
    const sequenceBreakers = DrySequenceBreakers.fromTokenSequences(breakers);
    applyDry(candidates, history, { multiplier, base, allowedLength, penaltyLastN: lastN, sequenceBreakers });
    softmaxOf(candidates).forEach((p, i) => expect(Math.abs(p - expected[i]!)).toBeLessThan(1e-5));
  });

  it("penalizes multiplier · base^(length − allowed) for the token that would extend a repeat (hand-computed)", () => {
    // History 7 8 1 2 3 9 7 8 1 2: the last four tokens (7 8 1 2) occurred before, followed by 3.
    // Repeat length 4, allowed 2: token 3 loses 1 · 2^(4−2) = 4. No other earlier run matches the
    // end of the history, so no other token is penalized.
    const history = [7, 8, 1, 2, 3, 9, 7, 8, 1, 2];
    expect(penalties(10, history, options({}))).toEqual([0, 0, 0, 4, 0, 0, 0, 0, 0, 0]);
    // With multiplier 0.5 and base 3: 0.5 · 3^2 = 4.5
    expect(penalties(10, history, options({ multiplier: 0.5, base: 3 }))[3]).toBe(4.5);
    // With allowedLength 4: 2^0 = 1; with allowedLength 5 the repeat is allowed.
    expect(penalties(10, history, options({ allowedLength: 4 }))[3]).toBe(1);
    expect(penalties(10, history, options({ allowedLength: 5 }))[3]).toBe(0);
    // Only the last 6 tokens (3 9 7 8 1 2) are scanned: the earlier 7 8 1 2 is out of reach.
    expect(penalties(10, history, options({ penaltyLastN: 6 }))[3]).toBe(0);
  });

  it("limits repeats at the most recent sequence breaker", () => {
    const history = [7, 8, 1, 2, 3, 9, 7, 8, 1, 2];
    // Breaker "7 8" (head 7, tail 8): only the 2 tokens after it (1 2) may repeat → 2^(2−2) = 1.
    expect(penalties(10, history, options({ sequenceBreakers: DrySequenceBreakers.fromTokenSequences([[7, 8]]) }))[3]).toBe(1);
    // Breaker "7" alone: 8 1 2 may repeat (3 tokens) → 2^(3−2) = 2.
    expect(penalties(10, history, options({ sequenceBreakers: DrySequenceBreakers.fromTokenSequences([[7]]) }))[3]).toBe(2);
    // Breaker "7 5" does not occur (7 is followed by 8): no limit → 4.
    expect(penalties(10, history, options({ sequenceBreakers: DrySequenceBreakers.fromTokenSequences([[7, 5]]) }))[3]).toBe(4);
    // Breaker "2" at the very end: nothing may repeat.
    expect(penalties(10, history, options({ sequenceBreakers: DrySequenceBreakers.fromTokenSequences([[2]]) }))[3]).toBe(0);
  });

  it("never penalizes a single-token breaker", () => {
    // 1 2 6 1 2: token 6 would extend "1 2" → 1; if 6 is a breaker it is left alone.
    expect(penalties(8, [1, 2, 6, 1, 2], options({}))[6]).toBe(1);
    expect(penalties(8, [1, 2, 6, 1, 2], options({ sequenceBreakers: DrySequenceBreakers.fromTokenSequences([[6]]) }))[6]).toBe(0);
  });

  it("caps the exponent so that the power stays a finite float", () => {
    // base 1e10: max exponent = trunc(88.7228391 / ln 1e10) = trunc(3.85) = 3. The repeat 1..7 has
    // length 7, exponent 7 − 2 = 5, capped to 3: penalty 1e30 (rounded to float32).
    const history = [1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3, 4, 5, 6, 7];
    expect(penalties(10, history, options({ base: 1e10 }))[9]).toBe(Math.fround(1e30));
  });

  it("does nothing when disabled or when the history is not longer than allowedLength", () => {
    const history = [1, 2, 6, 1, 2];
    for (const disabled of [{ multiplier: 0 }, { base: 0.9 }, { penaltyLastN: 0 }, { allowedLength: 5 }]) {
      expect(penalties(8, history, options(disabled)).every((p) => p === 0)).toBe(true);
    }
  });

  it("gives the same penalties per token on candidates out of token order", () => {
    const history = [7, 8, 1, 2, 3, 9, 7, 8, 1, 2];
    const candidates = Candidates.fromLogits(Float32Array.from({ length: 10 }, (_, i) => i / 10));
    sortCandidates(candidates);
    applyDry(candidates, history, options({}));
    const byId = new Map(idsOf(candidates).map((id, i) => [id, candidates.logits[i]]));
    expect(byId.get(3)).toBe(Math.fround(Math.fround(0.3) - 4));
    expect(byId.get(4)).toBe(Math.fround(0.4));
  });

  it("agrees with a brute-force search for repeats on random histories", () => {
    // Brute force from the definition: for every earlier position j, the longest run ending at j−1
    // that equals the run ending at the last token (capped by the breaker limit); window[j] would extend it.
    const random = testRandom(11);
    for (let trial = 0; trial < 200; trial++) {
      const vocabulary = 2 + Math.floor(random() * 4);
      const history = Array.from({ length: 1 + Math.floor(random() * 40) }, () => Math.floor(random() * vocabulary));
      const allowedLength = Math.floor(random() * 4);
      const lastN = random() < 0.5 ? -1 : 1 + Math.floor(random() * 40);
      const window = history.slice(lastN < 0 ? 0 : Math.max(0, history.length - lastN));
      const n = window.length;
      const expected = new Array<number>(vocabulary).fill(0);
      if (n > allowedLength) {
        const longest = new Map<number, number>();
        for (let j = 1; j < n; j++) {
          let length = 0;
          while (j - 1 - length >= 0 && window[j - 1 - length] === window[n - 1 - length] && j - 1 - length !== n - 1 - length) length++;
          if (length >= allowedLength) longest.set(window[j]!, Math.max(longest.get(window[j]!) ?? 0, length));
        }
        for (const [token, length] of longest) expected[token] = 1 * 2 ** (length - allowedLength);
      }
      expect(penalties(vocabulary, history, options({ allowedLength, penaltyLastN: lastN }))).toEqual(expected);
    }
  });
});

describe("DrySequenceBreakers.fromStrings", () => {
  // Token texts: 0 "x", 1 "a", 2 "b", 3 "xa", 4 ":", 5 "ab", 6 "c:d"
  const texts = ["x", "a", "b", "xa", ":", "ab", "c:d"];
  const tokenize = (text: string) => ({ ab: [5], b: [2] })[text] ?? [];

  it("makes every token containing a breaker a single-token breaker", () => {
    const breakers = DrySequenceBreakers.fromStrings([":"], texts.length, (id) => texts[id]!);
    expect([...breakers.singleTokenBreakers].sort()).toEqual([4, 6]);
  });

  it("makes a token ending with the start of a breaker a head, with the rest tokenized as its tail", () => {
    // "xab": "x" ends with "x" → tail tokenize("ab") = [5]; "xa" ends with "xa" → tail tokenize("b") = [2].
    const breakers = DrySequenceBreakers.fromStrings(["xab"], texts.length, (id) => texts[id]!, tokenize);
    expect([...breakers.heads.keys()].sort()).toEqual([0, 3]);
    expect(breakers.heads.get(0)!.map((tail) => Array.from(tail))).toEqual([[5]]);
    expect(breakers.heads.get(3)!.map((tail) => Array.from(tail))).toEqual([[2]]);
    expect(breakers.singleTokenBreakers.size).toBe(0);
    // Without a tokenizer only whole-breaker tokens count.
    expect(DrySequenceBreakers.fromStrings(["xab"], texts.length, (id) => texts[id]!).heads.size).toBe(0);
  });

  it("cuts breakers to 40 UTF-8 bytes", () => {
    const long = "é".repeat(30); // 60 bytes → 20 characters (40 bytes)
    const breakers = DrySequenceBreakers.fromStrings([long], 2, (id) => (id === 0 ? "é".repeat(20) : "é".repeat(19)));
    expect([...breakers.singleTokenBreakers]).toEqual([0]);
  });
});
