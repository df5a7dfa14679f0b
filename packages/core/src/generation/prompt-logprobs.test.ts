import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
});

afterAll(() => model.dispose());

describe("model.promptLogprobs", () => {
  it("scores each prompt token as generation scored it, over several 32-row steps", async () => {
    // A prompt of 70 tokens: its own, then a greedy continuation whose logprobs generation reported.
    const head = model.tokenizer.encode("The quick brown fox jumps over the lazy dog and runs far away into the woods", { special: false });
    const stream = model.generate(head, { temperature: 0, maxTokens: 70 - head.length, logprobs: true, topLogprobs: 3, ignoreEos: true });
    const generated: { token: number; logprob: number; top: readonly { id: number; logprob: number }[] }[] = [];
    for await (const chunk of stream) if (chunk.token !== undefined) generated.push({ token: chunk.token, logprob: chunk.logprob!, top: chunk.topLogprobs! });
    const tokens = [...head, ...generated.map((step) => step.token)];
    expect(tokens).toHaveLength(70);

    const scored = await model.promptLogprobs(tokens, { topLogprobs: 3 });
    expect(scored.tokens).toEqual(tokens);
    expect(scored.logprobs).toHaveLength(70);
    expect(scored.logprobs[0]).toBeNull();
    expect(scored.topLogprobs[0]).toBeNull();
    generated.forEach((step, i) => {
      const at = head.length + i;
      expect(scored.logprobs[at]).toBeCloseTo(step.logprob, 5);
      // Greedy: the token is the most likely at its position (lm-eval's is_greedy).
      expect(scored.topLogprobs[at]!.map((top) => top.id)).toEqual(step.top.map((top) => top.id));
      expect(scored.topLogprobs[at]![0]!.id).toBe(step.token);
      expect(scored.ranks[at]).toBe(1);
    });
    // Ranks: 1 + the tokens with a larger logit, as counted over the whole logits of each row.
    const rankCache = model.createCache(tokens.length);
    const all = model.forward(tokens, rankCache, { logits: "all" });
    rankCache.dispose();
    const vocabulary = model.vocabularySize;
    for (let position = 1; position < head.length; position++) {
      const row = all.subarray((position - 1) * vocabulary, position * vocabulary);
      const logit = row[tokens[position]!]!;
      expect(scored.ranks[position], `position ${position}`).toBe(1 + row.filter((value) => value > logit).length);
    }
    expect(scored.ranks[0]).toBeNull();
    // The prompt's own tokens: as the model's scoring op (forwardLogprobs, double precision on the host) gives them.
    const cache = model.createCache(tokens.length);
    const rows = Array.from({ length: tokens.length - 1 }, (_, i) => i);
    const reference = model.forwardLogprobs(tokens, cache, rows, tokens.slice(1));
    cache.dispose();
    rows.forEach((row) => expect(scored.logprobs[row + 1]).toBeCloseTo(reference[row]!, 4));
    // Without topLogprobs, empty lists; a text is tokenized as generate tokenizes it.
    const text = await model.promptLogprobs("Hello world");
    expect(text.tokens).toEqual(model.tokenizer.encode("Hello world", { special: true }));
    expect(text.topLogprobs.slice(1)).toEqual(text.tokens.slice(1).map(() => []));
    expect((await model.promptLogprobs([42])).logprobs).toEqual([null]);
  }, 60_000);

  it("names a wrong input, and stops when the signal aborts", async () => {
    await expect(model.promptLogprobs([])).rejects.toThrow(/the input has no tokens/);
    await expect(model.promptLogprobs([1, 10_000_000])).rejects.toThrow(/token 10000000 is outside the vocabulary/);
    await expect(model.promptLogprobs([1, 2], { topLogprobs: 21 })).rejects.toThrow(/topLogprobs must be an integer from 0 to 20/);
    const controller = new AbortController();
    controller.abort(new Error("stopped"));
    await expect(model.promptLogprobs(Array.from({ length: 40 }, (_, i) => i + 100), { signal: controller.signal })).rejects.toThrow(/stopped/);
    expect(model.engine.queue).toEqual({ running: 0, waiting: 0 });
  });
});
