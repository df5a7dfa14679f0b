import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateOptions } from "./generation-options";
import { InvalidOptionError } from "./generation-options";
import type { GenerationResult } from "./generation-types";
import { type Model, loadModel } from "../load-model";
import { alignToReference, lookupDraft } from "./speculative";

describe("lookupDraft (prompt lookup)", () => {
  it("continues the most recent earlier occurrence of the longest matching n-gram", () => {
    //            0  1  2  3  4  5  6  7  8  9
    const history = [1, 2, 3, 4, 9, 2, 3, 5, 7, 2, 3];
    // [2, 3] last occurred at 5 (followed by 5, 7), earlier at 1 (followed by 4): the most recent wins.
    expect(lookupDraft(history, 2, 2, 4)).toEqual([5, 7]);
    // A longer n-gram that matches beats a shorter one.
    const longer = [8, 2, 3, 6, 1, 2, 3, 4, 0, 8, 2, 3];
    expect(lookupDraft(longer, 1, 2, 3)).toEqual([6]); // [8, 2, 3] at 0, not [2, 3] at 5 (followed by 4)
    expect(lookupDraft(longer, 1, 2, 2)).toEqual([4]);
  });

  it("runs into the history's end periodically, and proposes nothing without a match", () => {
    // The last occurrence of [7, 8] is 3 tokens back: the guess is that [9, 7, 8] repeats.
    expect(lookupDraft([5, 7, 8, 9, 7, 8], 7, 2, 2)).toEqual([9, 7, 8, 9, 7, 8, 9]);
    expect(lookupDraft([4, 4, 4], 5, 1, 3)).toEqual([4, 4, 4, 4, 4]);
    expect(lookupDraft([1, 2, 3, 4], 4, 1, 3)).toEqual([]);
    expect(lookupDraft([1, 2, 1, 3], 4, 2, 3)).toEqual([]); // [1] recurs, but ngramMin is 2
    expect(lookupDraft([3], 4, 1, 3)).toEqual([]);
  });
});

describe("speculative decoding (reference backend)", () => {
  let model: Model;
  let path: string;
  beforeAll(async () => {
    path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
    model = loadModel(path);
  });
  afterAll(() => model.dispose());

  const prompt = "The quick brown fox jumps over the lazy dog. The quick brown fox";

  async function both(options: GenerateOptions, speculative: GenerateOptions["speculative"], on = model): Promise<{ plain: GenerationResult; fast: GenerationResult; plainSteps: number; fastSteps: number }> {
    let steps = on.engine.statistics.steps;
    const plain = await on.complete(prompt, options);
    const plainSteps = on.engine.statistics.steps - steps;
    steps = on.engine.statistics.steps;
    const fast = await on.complete(prompt, { ...options, speculative });
    return { plain, fast, plainSteps, fastSteps: on.engine.statistics.steps - steps };
  }

  const cases: [string, GenerateOptions][] = [
    ["greedy (the token picked on the backend)", { temperature: 0 }],
    ["greedy with logprobs (top candidates)", { temperature: 0, logprobs: true, topLogprobs: 3 }],
    ["sampled from the whole logits (seeded, repeat penalty)", { temperature: 0.8, repeatPenalty: 1.1, seed: 7 }],
    ["sampled from the best candidates (seeded top-k)", { temperature: 0.9, topK: 40, topP: 0.95, seed: 3 }],
  ];
  for (const [name, options] of cases) {
    it(`${name}: the same tokens as decoding one at a time, in fewer steps`, async () => {
      const { plain, fast, plainSteps, fastSteps } = await both({ ...options, maxTokens: 48 }, { method: "ngram" });
      expect(fast.tokens).toEqual(plain.tokens);
      expect(fast.text).toBe(plain.text);
      expect(fast.finishReason).toBe(plain.finishReason);
      expect(fast.speculative!.accepted).toBeGreaterThan(10);
      expect(fast.speculative!.drafted).toBeGreaterThanOrEqual(fast.speculative!.accepted);
      expect(plain.speculative).toBeUndefined();
      // Every accepted draft token is a step saved.
      expect(fastSteps).toBe(plainSteps - fast.speculative!.accepted);
    });
  }

  it("streams the same chunks with the same log-probabilities", async () => {
    const options: GenerateOptions = { temperature: 0.7, topK: 20, seed: 11, logprobs: true, topLogprobs: 2, maxTokens: 32 };
    const chunks = async (extra: GenerateOptions) => {
      const out: unknown[] = [];
      for await (const chunk of model.generate(prompt, { ...options, ...extra })) out.push(chunk);
      return out;
    };
    const plain = await chunks({});
    const fast = await chunks({ speculative: { method: "ngram", tokens: 4 } });
    expect(fast).toEqual(plain);
  });

  it("keeps maxTokens, stop strings and schemas as decoding one at a time does", async () => {
    for (const maxTokens of [1, 2, 5, 17]) {
      const { plain, fast } = await both({ temperature: 0, maxTokens }, { method: "ngram", tokens: 16 });
      expect(fast.tokens).toEqual(plain.tokens);
      expect(fast.tokens.length).toBeLessThanOrEqual(maxTokens);
    }
    const free = await model.complete(prompt, { temperature: 0, maxTokens: 24 });
    const stop = free.text.slice(free.text.length >> 1, (free.text.length >> 1) + 3);
    const { plain, fast } = await both({ temperature: 0, maxTokens: 24, stop }, { method: "ngram" });
    expect(fast.text).toBe(plain.text);
    expect(fast.stop).toBe(stop);
    const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 }, tags: { type: "array", items: { type: "string", enum: ["a", "bb"] }, maxItems: 6 } }, required: ["name", "tags"] };
    const shaped = await both({ temperature: 0, maxTokens: 80, schema }, { method: "ngram" });
    expect(shaped.fast.text).toBe(shaped.plain.text);
    expect(shaped.fast.value).toEqual(shaped.plain.value);
  });

  it("a draft model: the output is unchanged; a draft with the model's weights has every token accepted", async () => {
    const twin = loadModel(path); // the same file, a model of its own: it drafts what the model picks
    const stranger = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", seed: 99 })));
    try {
      const agreeing = await both({ temperature: 0, maxTokens: 40 }, { method: "draft", model: twin, minProbability: 0, tokens: 6 });
      expect(agreeing.fast.tokens).toEqual(agreeing.plain.tokens);
      expect(agreeing.fast.speculative!.drafted).toBeGreaterThan(30);
      expect(agreeing.fast.speculative!.accepted).toBe(agreeing.fast.speculative!.drafted);
      expect(agreeing.fastSteps).toBeLessThanOrEqual(Math.ceil(40 / 7) + 1);

      const sampled = await both({ temperature: 0.8, seed: 5, maxTokens: 40 }, { method: "draft", model: stranger, minProbability: 0, tokens: 4 });
      expect(sampled.fast.tokens).toEqual(sampled.plain.tokens);
      expect(sampled.fast.speculative!.drafted).toBeGreaterThan(0);
      // An unrelated draft is rarely right: the drafts per step shrink to 1 (4, 3, 2, 1, 1, ...).
      expect(sampled.fast.speculative!.drafted).toBeLessThanOrEqual(sampled.fastSteps + 6);

      // minProbability 1: no random-weight draft is that sure, so nothing is drafted.
      const unsure = await both({ temperature: 0, maxTokens: 12 }, { method: "draft", model: twin, minProbability: 1 });
      expect(unsure.fast.tokens).toEqual(unsure.plain.tokens);
      expect(unsure.fast.speculative).toEqual({ drafted: 0, accepted: 0 });
      // The drafter's sequences are released with the generation.
      expect(twin.engine.queue).toEqual({ running: 0, waiting: 0 });
      expect(twin.engine.pool.usedBlocks).toBe(0);
    } finally {
      twin.dispose();
      stranger.dispose();
    }
  });

  it("a prediction (OpenAI's predicted outputs): drafts from the expected output, the output unchanged", async () => {
    const options: GenerateOptions = { temperature: 0, maxTokens: 40 };
    const { plain } = await both(options, undefined);
    // The exact output as the prediction: every token after the first is drafted and accepted.
    let steps = model.engine.statistics.steps;
    const exact = await model.complete(prompt, { ...options, prediction: [...plain.tokens] });
    steps = model.engine.statistics.steps - steps;
    expect(exact.tokens).toEqual(plain.tokens);
    // Prefill, then steps of 16 drafts and the token after them; each step's tokens but one were drafted.
    expect(steps).toBe(1 + Math.ceil((plain.tokens.length - 1) / 17));
    expect(exact.speculative).toEqual({ drafted: plain.tokens.length - steps, accepted: plain.tokens.length - steps });
    // An edited prediction: two tokens changed, four dropped, three inserted. The output is the
    // model's; the drafts realign after each edit.
    const edited = [...plain.tokens];
    edited[5] = 9;
    edited.splice(14, 4);
    edited.splice(24, 0, 11, 12, 13);
    edited[30] = 7;
    const revised = await model.complete(prompt, { ...options, prediction: edited });
    expect(revised.tokens).toEqual(plain.tokens);
    expect(revised.speculative!.accepted).toBeGreaterThan(20);
    // With the text, tokenized; sampled; and with a draft method beside it.
    const sampled = await both({ temperature: 0.8, seed: 1, maxTokens: 40 }, undefined);
    const text = await model.complete(prompt, { temperature: 0.8, seed: 1, maxTokens: 40, prediction: sampled.plain.text, speculative: { method: "ngram", tokens: 4 } });
    expect(text.tokens).toEqual(sampled.plain.tokens);
    expect(text.speculative!.accepted).toBeGreaterThan(0);
    expect(() => model.generate(prompt, { prediction: [1, model.vocabularySize] })).toThrow(/prediction: token id 151936 is outside the vocabulary/);
  });

  it("refuses a draft model of another vocabulary, the model itself, and bad numbers, naming the option", async () => {
    const demo = loadModel(new URL("../../../cli/assets/memra-demo-qwen3-q8_0.gguf", import.meta.url).pathname);
    try {
      expect(() => model.generate(prompt, { speculative: { method: "draft", model: demo } })).toThrow(InvalidOptionError);
      expect(() => model.generate(prompt, { speculative: { method: "draft", model: demo } })).toThrow(/speculative\.model has 4096 tokens, the model 151936/);
    } finally {
      demo.dispose();
    }
    expect(() => model.generate(prompt, { speculative: { method: "draft", model } })).toThrow(/is the model itself/);
    expect(() => model.generate(prompt, { speculative: { method: "ngram", tokens: 0 } })).toThrow(/speculative\.tokens must be at least 1/);
    expect(() => model.generate(prompt, { speculative: { method: "ngram", ngramMin: 4, ngramMax: 2 } })).toThrow(/ngramMin must not exceed/);
    expect(() => model.generate(prompt, { speculative: { method: "medusa" } as never })).toThrow(InvalidOptionError);
    expect(() => model.generate(prompt, { speculative: { method: "draft", model: {} as never } })).toThrow(/speculative\.model must be a loaded model/);
  });
});

describe("alignToReference", () => {
  it("finds the output's longest suffix in the reference, from the cursor on, else before it", () => {
    const reference = [1, 2, 3, 4, 1, 2, 5, 6];
    expect(alignToReference([9, 1, 2], reference, 4, 0)).toBe(2); // first [1, 2] from 0
    expect(alignToReference([9, 1, 2], reference, 4, 3)).toBe(6); // first from 3 on
    expect(alignToReference([9, 1, 2], reference, 4, 7)).toBe(6); // none from 7: the last before
    expect(alignToReference([4, 1, 2], reference, 4, 0)).toBe(6); // [4, 1, 2] beats [1, 2]
    expect(alignToReference([4, 1, 2], reference, 1, 0)).toBe(2); // longest 1: [2] first at 1
    expect(alignToReference([7, 8], reference, 4, 0)).toBe(-1);
  });
});

describe("EngineSequence.evaluateRows", () => {
  it("gives each row the logits evaluating one token at a time gives, across prefill chunks, and their best candidates", async () => {
    const model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "f32" })));
    try {
      const tokens = [9707, 11, 1879, 0, 785, 3974, 13876, 38835, 34208, 916, 279, 15678];
      const vocabulary = model.vocabularySize;
      const single = model.engine.createSequence(32);
      const expected: Float32Array[] = [];
      for (let i = 0; i < tokens.length; i++) expected.push((await single.evaluate([tokens[i]!]))!.slice());
      single.release();

      for (const chunkTokens of [Number.POSITIVE_INFINITY, 5, 1]) {
        const rows = 7;
        const sequence = model.engine.createSequence(32);
        const out = await sequence.evaluateRows(tokens, rows, { chunkTokens });
        if (!out || !("logits" in out)) throw new Error("no logits");
        expect(out.logits.length).toBe(rows * vocabulary);
        for (let r = 0; r < rows; r++) {
          const want = expected[tokens.length - rows + r]!;
          const got = out.logits.subarray(r * vocabulary, (r + 1) * vocabulary);
          let worst = 0;
          for (let v = 0; v < vocabulary; v++) worst = Math.max(worst, Math.abs(got[v]! - want[v]!));
          expect(worst, `chunk ${chunkTokens} row ${r}`).toBeLessThan(1e-4);
        }
        // Rewound past the rows, the sequence continues: the top candidates of two more rows.
        sequence.rewind(tokens.length - 2);
        const tops = await sequence.evaluateRows(tokens.slice(-2), 2, { top: 3, logSumExp: true });
        if (!tops || !("tops" in tops)) throw new Error("no tops");
        for (let r = 0; r < 2; r++) {
          const want = expected[tokens.length - 2 + r]!;
          const best = [...want.keys()].sort((a, b) => want[b]! - want[a]! || a - b).slice(0, 3);
          expect(Array.from(tops.tops[r]!.ids)).toEqual(best);
          expect(tops.tops[r]!.logSumExp![0]).toBeGreaterThan(want[best[0]!]!);
        }
        sequence.release();
      }
      // Tokens whose blocks are in the prefix cache: the rows asked for are evaluated all the same.
      const long = Array.from({ length: 40 }, (_, i) => tokens[i % tokens.length]!);
      const first = model.engine.createSequence(64);
      await first.evaluate(long);
      first.release();
      const reference = model.engine.createSequence(64);
      const want = new Float32Array(long.length * vocabulary);
      for (let i = 0; i < long.length; i++) want.set((await reference.evaluate([long[i]!]))!, i * vocabulary);
      reference.release();
      const reusing = model.engine.createSequence(64);
      const all = await reusing.evaluateRows(long, long.length);
      if (!all || !("logits" in all)) throw new Error("no logits");
      expect(reusing.reusedTokens).toBe(0);
      let worst = 0;
      for (let v = 0; v < want.length; v++) worst = Math.max(worst, Math.abs(all.logits[v]! - want[v]!));
      expect(worst).toBeLessThan(1e-4);
      reusing.release();
      // The last 8 rows of them: the two blocks before them come from the prefix cache.
      const tail = model.engine.createSequence(64);
      const last = await tail.evaluateRows(long, 8);
      if (!last || !("logits" in last)) throw new Error("no logits");
      expect(tail.reusedTokens).toBe(32);
      expect(maxOf(last.logits, want.subarray((long.length - 8) * vocabulary))).toBeLessThan(1e-4);
      tail.release();

      const sequence = model.engine.createSequence(32);
      await expect(sequence.evaluateRows(tokens, 0)).rejects.toThrow(RangeError);
      await expect(sequence.evaluateRows([1, 2], 3)).rejects.toThrow(/rows must be an integer from 1 to the 2 tokens given/);
      sequence.release();
    } finally {
      model.dispose();
    }
  });
});

function maxOf(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}
