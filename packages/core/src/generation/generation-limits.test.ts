import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";
import { IndentLimit } from "./indent-limit";
import { StructuredOutputError } from "./output-constraint";
import type { GenerateOptions } from "./generation-options";
import type { GenerationResult } from "./generation-types";

// A vocabulary of 512 tokens: the 5 end-of-generation tokens are then often among a step's best
// candidates, so the bans below are exercised where they change picks.
let model: Model;
let endOfGeneration: number[];
/** logitBias banning every end-of-generation token: the whole-logits path the bans must agree with. */
let maskedEog: Record<number, number>;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0", vocabulary: 512 })));
  endOfGeneration = [...model.tokenizer.endOfGenerationTokenIds];
  maskedEog = Object.fromEntries(endOfGeneration.map((id) => [id, -Infinity]));
});

afterAll(() => model.dispose());

/** A grammar-constrained completion's result, also when a limit cut the output short of the grammar's end. */
async function completeCut(prompt: string, options: GenerateOptions): Promise<GenerationResult> {
  try {
    return await model.complete(prompt, options);
  } catch (error) {
    if (error instanceof StructuredOutputError && error.result) return error.result;
    throw error;
  }
}

const eosBoost = () => ({ [model.tokenizer.eosTokenId!]: 30 });

describe("ignoreEos, minTokens and stopTokens", () => {
  it("ignoreEos bans end of generation, even when a bias makes it the best token", async () => {
    const greedy = await model.complete("Hello", { temperature: 0, maxTokens: 48, ignoreEos: true });
    const greedyMasked = await model.complete("Hello", { temperature: 0, maxTokens: 48, logitBias: maskedEog });
    expect(greedy.tokens).toEqual(greedyMasked.tokens);
    expect(greedy.finishReason).toBe("length");
    const boosted = await model.complete("Hello", { temperature: 0, maxTokens: 8, logitBias: eosBoost() });
    expect(boosted.tokens).toEqual([model.tokenizer.eosTokenId]);
    expect(boosted.finishReason).toBe("stop");
    const boostedIgnoring = await model.complete("Hello", { temperature: 0, maxTokens: 8, logitBias: eosBoost(), ignoreEos: true });
    expect(boostedIgnoring.tokens).toHaveLength(8);
    expect(boostedIgnoring.tokens.some((id) => model.tokenizer.isEndOfGeneration(id))).toBe(false);
    expect(boostedIgnoring.finishReason).toBe("length");
  });

  it("banned tokens are left out of the best candidates as a -inf logit bias leaves them out of the logits", async () => {
    // The end-of-generation tokens rank low in this model; the stop tokens banned by minTokens are
    // the ones the plain runs pick, so the bans change most picks.
    const prompt = "The quick brown fox";
    for (const sampling of [{ temperature: 0 }, { temperature: 1.2, topK: 40, seed: 5 }]) {
      const plain = await model.complete(prompt, { ...sampling, maxTokens: 32, ignoreEos: true });
      const stopTokens = [...new Set(plain.tokens)].slice(0, 8);
      const bias = { ...maskedEog, ...Object.fromEntries(stopTokens.map((id) => [id, -Infinity])) };
      // Picked from the best candidates (the backend's top-k) with the bans taken out.
      const banned = await model.complete(prompt, { ...sampling, maxTokens: 32, minTokens: 32, stopTokens });
      // Picked from the whole logits with the bias.
      const masked = await model.complete(prompt, { ...sampling, maxTokens: 32, logitBias: bias });
      expect(banned.tokens, JSON.stringify(sampling)).toEqual(masked.tokens);
      expect(banned.tokens.some((id) => stopTokens.includes(id))).toBe(false);
      expect(banned.tokens).not.toEqual(plain.tokens);
      // With logprobs too (the candidates then also serve the log-probabilities).
      const stream = model.generate(prompt, { ...sampling, maxTokens: 32, minTokens: 32, stopTokens, logprobs: true, topLogprobs: 2 });
      const logprobs: number[] = [];
      for await (const chunk of stream) if (chunk.logprob !== undefined) logprobs.push(chunk.logprob);
      expect((await stream.result).tokens).toEqual(masked.tokens);
      expect(logprobs).toHaveLength(32);
    }
  }, 120_000);

  it("bans end of generation until minTokens are generated", async () => {
    const plain = await model.complete("Hello", { temperature: 0, maxTokens: 8, ignoreEos: true });
    const result = await model.complete("Hello", { temperature: 0, maxTokens: 8, logitBias: eosBoost(), minTokens: 4 });
    expect(result.tokens).toHaveLength(5);
    expect(result.tokens.slice(0, 4)).toEqual(plain.tokens.slice(0, 4));
    expect(result.tokens[4]).toBe(model.tokenizer.eosTokenId);
    expect(result.finishReason).toBe("stop");
  });

  it("ends at a stop token, which is in tokens and not in the text; minTokens bans it too", async () => {
    const plain = await model.complete("The quick brown fox", { temperature: 0, maxTokens: 16, ignoreEos: true });
    const stopToken = plain.tokens[5]!;
    const first = plain.tokens.indexOf(stopToken);
    const stopped = await model.complete("The quick brown fox", { temperature: 0, maxTokens: 16, ignoreEos: true, stopTokens: [stopToken] });
    expect(stopped.tokens).toEqual(plain.tokens.slice(0, first + 1));
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.text).toBe(model.tokenizer.decode(plain.tokens.slice(0, first)));
    // Banned for the first `first + 1` picks, the stop token cannot end the output that early.
    const later = await model.complete("The quick brown fox", { temperature: 0, maxTokens: 16, ignoreEos: true, stopTokens: [stopToken], minTokens: first + 1 });
    expect(later.tokens.slice(0, first + 1)).not.toContain(stopToken);
    expect(later.tokens.length).toBeGreaterThan(first + 1);
  });

  it("names a wrong minTokens, stop token or time budget", async () => {
    await expect(model.complete("Hi", { maxTokens: 4, minTokens: 5 })).rejects.toThrow(/minTokens \(5\) exceeds maxTokens \(4\)/);
    await expect(model.complete("Hi", { maxTokens: 4, stopTokens: [512] })).rejects.toThrow(InvalidOptionError);
    await expect(model.complete("Hi", { maxTokens: 4, stopTokens: [512] })).rejects.toThrow(/stopTokens: token id 512 is outside the vocabulary/);
    await expect(model.complete("Hi", { maxTokens: 4, minTokens: -1 })).rejects.toThrow(/minTokens must be at least 0/);
    await expect(model.complete("Hi", { maxTokens: 4, maxTimeMs: 0 })).rejects.toThrow(/maxTimeMs must be positive/);
  });
});

describe("maxTimeMs and minIndent", () => {
  it("ends as length once the time budget is spent, with maxTimeAfterNewline only after a newline", async () => {
    const spent = await model.complete("Hello", { temperature: 0, maxTokens: 16, ignoreEos: true, maxTimeMs: 0.001 });
    expect(spent.tokens).toHaveLength(1);
    expect(spent.finishReason).toBe("length");

    const grammar = 'root ::= "ab" "\\n" "cd" [a-z]*';
    const free = await completeCut("Hello", { temperature: 0, maxTokens: 12, grammar, ignoreEos: true });
    expect(free.tokens.length).toBe(12);
    const afterNewline = await completeCut("Hello", { temperature: 0, maxTokens: 12, grammar, ignoreEos: true, maxTimeMs: 0.001, maxTimeAfterNewline: true });
    expect(afterNewline.finishReason).toBe("length");
    expect(afterNewline.text).toContain("\n");
    // It ends at the first token whose text holds the newline.
    const beforeLast = model.tokenizer.decode(afterNewline.tokens.slice(0, -1));
    expect(beforeLast).not.toContain("\n");
    expect(afterNewline.tokens).toEqual(free.tokens.slice(0, afterNewline.tokens.length));
  }, 60_000);

  it("ends at a line indented less than minIndent, keeping its newline and indentation", async () => {
    const grammar = 'root ::= "if x:\\n    a = 1\\n  b = 2\\n" [a-z]*';
    const full = await completeCut("Code:", { temperature: 0, maxTokens: 24, grammar });
    expect(full.text.startsWith("if x:\n    a = 1\n  b = 2\n")).toBe(true);
    const cut = await completeCut("Code:", { temperature: 0, maxTokens: 24, grammar, minIndent: 4 });
    expect(cut.text).toBe("if x:\n    a = 1\n  ");
    expect(cut.finishReason).toBe("length");
    const streamed = model.generate("Code:", { temperature: 0, maxTokens: 24, grammar, minIndent: 2 });
    let text = "";
    for await (const chunk of streamed) text += chunk.text;
    expect(text).toBe((await streamed.result).text);
    expect(text.startsWith("if x:\n    a = 1\n  b = 2\n")).toBe(true);
  }, 60_000);

  it("IndentLimit follows llama.cpp's n_indent rule across pushes", () => {
    const limit = new IndentLimit(2);
    expect(limit.push("first line has no rule\n ")).toEqual({ text: "first line has no rule\n ", stopped: false });
    expect(limit.push(" ok\n\t\tfine\n  \n")).toEqual({ text: " ok\n\t\tfine\n  \n", stopped: false });
    // A blank line is a line that starts with less indentation (llama.cpp stops there too).
    expect(limit.push("\nnext")).toEqual({ text: "", stopped: true });
    expect(limit.push("more")).toEqual({ text: "", stopped: true });
    const other = new IndentLimit(4);
    expect(other.push("x\n  y")).toEqual({ text: "x\n  ", stopped: true });
  });
});
