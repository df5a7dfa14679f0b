import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: 512 })), { kvCacheTokens: 256 });
});

afterAll(() => model.dispose());

describe("generate with contextShift", () => {
  const prompt = Array.from({ length: 20 }, (_, i) => 10 + i);

  it("shifts when the next token would fill the context, as llama.cpp's server does, and matches a shift done by hand", async () => {
    const result = await model.generate(prompt, { temperature: 0, maxTokens: 60, ignoreEos: true, contextTokens: 48, contextShift: { keep: 5 } }).result;
    expect(result.tokens).toHaveLength(60);
    // 20 + 27 = 47 tokens fill 48 - 1: discard (47 - 5) / 2 = 21; then 26 + 21 more: discard 21 again.
    expect(result.contextShift).toEqual({ shifts: 2, discardedTokens: 42 });
    const sequence = model.engine.createSequence(48);
    const tokens: number[] = [];
    let next = await sequence.evaluateGreedy(prompt);
    for (;;) {
      tokens.push(next!);
      if (tokens.length === 60) break;
      if (sequence.tokens.length + 1 >= 48) sequence.shift(5, Math.floor((sequence.tokens.length - 5) / 2));
      next = await sequence.evaluateGreedy([next!]);
    }
    sequence.release();
    expect(result.tokens).toEqual(tokens);
    // A generation that fits shifts nothing and reports no shift.
    const fits = await model.generate(prompt, { temperature: 0, maxTokens: 20, contextTokens: 48, contextShift: true }).result;
    expect(fits.contextShift).toBeUndefined();
  });

  it("keep -1 keeps the whole prompt; discard drops that many", async () => {
    const whole = await model.generate(prompt, { temperature: 0, maxTokens: 40, ignoreEos: true, contextTokens: 32, contextShift: { keep: -1, discard: 4 } }).result;
    // Shifts before feeding generated tokens 12, 16, ..., 36 (each frees 4 slots of the 32).
    expect(whole.contextShift).toEqual({ shifts: 7, discardedTokens: 28 });
  });

  it("refuses what cannot shift, naming the option", async () => {
    const refused = (options: object) => {
      try {
        model.generate(prompt, { temperature: 0, maxTokens: 60, contextTokens: 32, ...options });
      } catch (error) {
        return error;
      }
      return undefined;
    };
    expect(refused({ contextShift: { keep: -1 }, contextTokens: 22 })).toEqual(new InvalidOptionError("contextShift", "contextShift: keeping 20 tokens of a 22-token context leaves 1 after them when it shifts, half of them is none"));
    expect(refused({ contextShift: { keep: 0, discard: 40 } })).toBeInstanceOf(InvalidOptionError);
    expect(refused({ contextShift: true, speculative: { method: "ngram" } })).toEqual(new InvalidOptionError("contextShift", "contextShift cannot be combined with speculative decoding or a prediction"));
    expect(refused({ contextShift: true, contextTokens: 20 })).toBeInstanceOf(RangeError); // the prompt fills it
    expect(refused({ contextTokens: model.contextLength + 1 })).toBeInstanceOf(InvalidOptionError);
    expect(refused({})).toBeInstanceOf(RangeError); // no shift: 20 + 60 tokens do not fit 32
    expect(() => model.createChatSession({ contextLength: 64 }).send("hi", { contextShift: true })).toThrow(/a chat session leaves its oldest turns out instead/);
  });
});
