/**
 * A lazy grammar (grammarTrigger, tools in "auto") leaves the tokens before its trigger to the
 * sampler alone: those are picked from the best candidates where the logits are, as without a
 * constraint, and only the steps the grammar governs read the logits back. The tokens are those
 * of the whole-logits path.
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { type Model, loadModel } from "../load-model";
import { ReferenceBackend } from "../reference-backend";
import { countingBackend } from "../testing/counting-backend";
import { gbnfLiteral } from "@memra/sampler";

let counted: Model & { backend: ReturnType<typeof countingBackend<ReferenceBackend>> };
let plain: Model;
let backend: ReturnType<typeof countingBackend<ReferenceBackend>>;

beforeAll(async () => {
  const path = await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" }));
  const inner = new ReferenceBackend();
  backend = countingBackend(inner, { topKRows: inner.topKRows.bind(inner) });
  counted = loadModel(path, { backend }) as typeof counted;
  plain = loadModel(path, { backend: new ReferenceBackend() });
});

const prompt = "Once upon a time";
// llama.cpp's default chain (top-k 40, ...): a pick that the best 40 candidates decide.
const sampling = { seed: 5, maxTokens: 16 };
// A logit bias (of 0) keeps the sampler on the whole logits: the path every constrained step took before.
const wholeLogits = { logitBias: { 0: 0 } };

describe("lazy grammars pick their free tokens where the logits are", () => {
  it("before the trigger no logits come back; from it on, one row per step; the tokens are the whole-logits path's", async () => {
    const free = await plain.complete(prompt, sampling);
    // The trigger: the text of a token of the free output (from its 3rd on) that is new there, so that it fires at that token.
    const textOf = (tokens: readonly number[]) => plain.tokenizer.decode(tokens);
    const fireAt = free.tokens.findIndex((token, i) => i >= 2 && textOf([token]).trim() !== "" && !textOf(free.tokens.slice(0, i + 1)).slice(0, -1).includes(textOf([token])));
    expect(fireAt).toBeGreaterThan(1);
    expect(fireAt).toBeLessThan(12);
    const trigger = textOf([free.tokens[fireAt]!]);
    const grammar = `root ::= ${gbnfLiteral(trigger)} [a-z ]{1,6} "."`;
    const options = { ...sampling, grammar, grammarTrigger: trigger };

    const before = backend.counts.floatsRead;
    const fast = await counted.complete(prompt, options);
    const read = backend.counts.floatsRead - before;
    const whole = await plain.complete(prompt, { ...options, ...wholeLogits });
    expect(fast.tokens).toEqual(whole.tokens);
    expect(fast.tokens.slice(0, fireAt + 1)).toEqual(free.tokens.slice(0, fireAt + 1));
    expect(fast.text.slice(fast.text.indexOf(trigger) + trigger.length)).toMatch(/^[a-z ]{1,6}\.$/);
    // Logits were read for each token after the firing one, and for no other.
    const governed = fast.tokens.length - 1 - fireAt;
    expect(governed).toBeGreaterThan(0);
    expect(read).toBe(governed * counted.vocabularySize);
  });

  it("a trigger that never appears reads no logits at all, and changes nothing", async () => {
    const grammar = 'root ::= "\\u2603" [a-z]';
    const before = backend.counts.floatsRead;
    const fast = await counted.complete(prompt, { ...sampling, grammar, grammarTrigger: "\u2603" });
    expect(backend.counts.floatsRead - before).toBe(0);
    expect(fast.tokens).toEqual((await plain.complete(prompt, sampling)).tokens);
  });

  it('tools in "auto": a turn without a call reads no logits, and is the whole-logits path\'s turn', async () => {
    const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
    const messages = [{ role: "user" as const, content: "Weather in Oslo?" }];
    const before = backend.counts.floatsRead;
    const fast = await counted.chat(messages, { ...sampling, tools });
    expect(backend.counts.floatsRead - before).toBe(0);
    expect(fast.toolCalls).toEqual([]);
    const whole = await plain.chat(messages, { ...sampling, ...wholeLogits, tools });
    expect(fast.text).toBe(whole.text);
  });
});
