import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { splitReasoning } from "@memra/tokenizer";
import { beforeAll, describe, expect, it } from "vitest";
import { loadGoldenSuite } from "../conformance/golden-suite";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
});

describe("model.generate", () => {
  it("at temperature 0 gives llama.cpp's greedy tokens up to the first near-tie", async () => {
    // The generation loop's greedy path on a dense and a MoE model (the golden suites compare every
    // model's numbers); on the reference backend each prompt is seconds of its TypeScript LM head.
    const { suite, goldens } = loadGoldenSuite();
    for (const [id, prompts] of [
      ["dense-f32", 8],
      ["moe-q8_0", 3],
    ] as const) {
      const entry = suite.models.find((m) => m.id === id)!;
      const golden = goldens.get(id)!;
      const goldenModel = loadModel(await syntheticModelFile(resolveOptions(entry.preset as "small", entry.options)));
      for (const prompt of golden.prompts.slice(0, prompts)) {
        const firstTie = prompt.steps.findIndex((step) => step.margin < 0.1);
        const decided = firstTie < 0 ? prompt.continuation.length : firstTie;
        const result = await goldenModel.complete(prompt.promptTokens, { temperature: 0, maxTokens: decided + 1 });
        expect(result.tokens.slice(0, decided), `${id} ${prompt.id}`).toEqual(prompt.continuation.slice(0, decided));
      }
      goldenModel.dispose();
    }
  }, 300_000);

  it("awaiting result alone runs the generation; reading result first still streams", async () => {
    const expected = await model.complete("The quick brown fox", { temperature: 0, maxTokens: 8 });
    const alone = await model.generate("The quick brown fox", { temperature: 0, maxTokens: 8 }).result;
    expect(alone.text).toBe(expected.text);
    expect(alone.tokens).toEqual(expected.tokens);

    const stream = model.generate("The quick brown fox", { temperature: 0, maxTokens: 8 });
    const { result } = stream;
    await Promise.resolve(); // a microtask later, iteration still starts here
    let text = "";
    for await (const chunk of stream) text += chunk.text;
    expect(text).toBe(expected.text);
    expect((await result).tokens).toEqual(expected.tokens);

    const session = model.createChatSession();
    const turn = await session.send("Hello", { temperature: 0, maxTokens: 4 }).result;
    expect(turn.usage.completionTokens).toBeGreaterThan(0);
    expect(session.messages.at(-1)).toEqual({ role: "assistant", content: turn.text });
    session.dispose();
  });

  it("streams text deltas that add up to the result, with usage, finish reason and timings", async () => {
    const stream = model.generate("The quick brown fox", { temperature: 0, maxTokens: 12, logprobs: true });
    let text = "";
    const tokens: number[] = [];
    for await (const chunk of stream) {
      text += chunk.text;
      if (chunk.token !== undefined) {
        tokens.push(chunk.token);
        expect(chunk.logprob).toBeLessThanOrEqual(0);
      }
    }
    const result = await stream.result;
    expect(result.text).toBe(text);
    expect(result.tokens).toEqual(tokens);
    expect(result.finishReason).toBe("length");
    expect(result.usage).toEqual({ promptTokens: 4, completionTokens: 12, cachedPromptTokens: 0 });
    expect(result.timings.prefillTokensPerSecond).toBeGreaterThan(0);
    expect(result.timings.decodeTokensPerSecond).toBeGreaterThan(0);
    expect(model.tokenizer.decode(result.tokens)).toBe(result.text);
  });

  it("gives the same text for the same seed and a different one for another seed", async () => {
    const run = (seed: number) => model.complete("Once upon a time", { temperature: 0.8, seed, maxTokens: 24 });
    const [a, b, c] = [await run(7), await run(7), await run(8)];
    expect(a.text).toBe(b.text);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.seed).toBe(7);
    expect(c.tokens).not.toEqual(a.tokens);
  });

  it("stops at a stop string that spans token boundaries and never returns part of it", async () => {
    const free = model.generate("Hello", { temperature: 0, maxTokens: 16 });
    const boundaries: number[] = [];
    let text = "";
    for await (const chunk of free) {
      text += chunk.text;
      boundaries.push(text.length);
    }
    // A two-character stop string across a boundary between two chunks, at its first occurrence.
    const boundary = boundaries.find((b, i) => i > 0 && b > 1 && b < text.length && text.indexOf(text.slice(b - 1, b + 1)) === b - 1);
    expect(boundary).toBeDefined();
    const stop = text.slice(boundary! - 1, boundary! + 1);
    const stopped = await model.complete("Hello", { temperature: 0, maxTokens: 16, stop: ["never-generated", stop] });
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.stop).toBe(stop);
    expect(stopped.text).toBe(text.slice(0, boundary! - 1));
  });

  it("aborts during prefill and during decode", async () => {
    const longPrompt = Array.from({ length: 400 }, (_, i) => 1000 + i);
    const duringPrefill = new AbortController();
    const stream = model.generate(longPrompt, { temperature: 0, maxTokens: 8, prefillChunkTokens: 8, signal: duringPrefill.signal });
    setTimeout(() => duringPrefill.abort(), 5);
    const chunks: unknown[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const prefillResult = await stream.result;
    expect(prefillResult.finishReason).toBe("abort");
    expect(prefillResult.tokens).toEqual([]);
    expect(chunks).toEqual([]);

    const duringDecode = new AbortController();
    const decodeStream = model.generate("Hello", { temperature: 0, maxTokens: 50, signal: duringDecode.signal });
    let seen = 0;
    for await (const chunk of decodeStream) if (chunk.token !== undefined && ++seen === 3) duringDecode.abort();
    const decodeResult = await decodeStream.result;
    expect(decodeResult.finishReason).toBe("abort");
    expect(decodeResult.tokens).toHaveLength(3);
  });

  it("ends as an abort when the consumer leaves the loop", async () => {
    const stream = model.generate("Hello", { temperature: 0, maxTokens: 50 });
    for await (const _chunk of stream) break;
    expect((await stream.result).finishReason).toBe("abort");
  });

  it("names a wrong option", () => {
    expect(() => model.generate("x", { temperature: -1 })).toThrow(InvalidOptionError);
    expect(() => model.generate("x", { temperature: -1 })).toThrow(/temperature/);
    expect(() => model.generate("x", { maxTokens: 0 })).toThrow(/maxTokens/);
    expect(() => model.generate("x", { topK: 1.5 })).toThrow(/topK/);
    expect(() => model.generate("x", { bogus: 1 } as never)).toThrow(/bogus/);
  });
});

describe("chat", () => {
  it("applies the template, splits reasoning from the answer, and reuses the cache across turns", async () => {
    const session = model.createChatSession({ system: "You are terse." });
    const first = await drain(session.send("Hi there", { temperature: 0, maxTokens: 8, enableThinking: false }));
    expect(first.usage.cachedPromptTokens).toBe(0);
    expect(first.reasoning).toBe("");
    expect(first.answer).toBe(first.text.replace(/^<think>\n\n<\/think>\n\n/, ""));
    const second = await drain(session.send("And again?", { temperature: 0, maxTokens: 8, enableThinking: false }));
    // The system prompt and the first user turn are not evaluated again.
    const systemAndFirstTurn = model.tokenizer.encode("<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n", { special: true });
    expect(second.usage.cachedPromptTokens).toBeGreaterThanOrEqual(systemAndFirstTurn.length);
    expect(session.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "user", "assistant"]);
    session.dispose();
  });

  it("model.chat renders messages and returns reasoning and answer", async () => {
    const result = await model.chat([{ role: "user", content: "Hello" }], { temperature: 0, maxTokens: 6 });
    const prompt = model.tokenizer.decode(result.promptTokens, { special: true });
    expect(prompt).toBe("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    const split = splitReasoning(result.text);
    expect([result.reasoning, result.answer]).toEqual([split.reasoning, split.content]);
  });
});

async function drain<T>(stream: AsyncIterable<unknown> & { result: Promise<T> }): Promise<T> {
  for await (const _chunk of stream) {
    // drain
  }
  return stream.result;
}
