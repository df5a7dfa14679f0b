/**
 * Chat with tools on a synthetic model (random weights, Qwen3's vocabulary and chat template):
 * the template renders the tools, a forced tool choice yields calls that parse and fit each
 * function's schema, and the calls come back as the chat result's toolCalls.
 */
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type Model, loadModel } from "../load-model";
import { InvalidOptionError } from "./generation-options";
import { StructuredOutputError } from "./output-constraint";

let model: Model;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
});

const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["C", "F"] }, day: { type: "string", format: "date" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};
const add = {
  type: "function" as const,
  function: { name: "add", parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 99 }, b: { type: "integer", minimum: 1 } }, required: ["a", "b"] } },
};
const messages = [{ role: "user" as const, content: "What is the weather in Paris?" }];
const sampling = { temperature: 1, topK: 0, topP: 1, minP: 0, maxTokens: 160 };

function checkArguments(name: string, json: string): void {
  const args = JSON.parse(json);
  if (name === "get_weather") {
    expect(typeof args.city).toBe("string");
    expect(args.city.length).toBeLessThanOrEqual(12);
    expect(Object.keys(args).every((key) => key === "city" || key === "unit" || key === "day")).toBe(true);
    if (args.unit !== undefined) expect(["C", "F"]).toContain(args.unit);
    if (args.day !== undefined) expect(z.iso.date().safeParse(args.day).success, args.day).toBe(true);
  } else {
    expect(name).toBe("add");
    expect(Number.isInteger(args.a) && args.a >= 0 && args.a <= 99).toBe(true);
    expect(Number.isSafeInteger(args.b) && args.b >= 1).toBe(true);
  }
}

describe("model.chat with tools", () => {
  it("renders the tools into the prompt with the model's template", async () => {
    const plain = await model.chat(messages, { temperature: 0, maxTokens: 1 });
    const withTools = await model.chat(messages, { temperature: 0, maxTokens: 1, tools: [weather] });
    const toolsPrompt = model.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: true, tools: [weather] });
    expect(toolsPrompt).toContain('"name": "get_weather"');
    expect(withTools.usage.promptTokens).toBe(model.tokenizer.encode(toolsPrompt, { special: true }).length);
    expect(withTools.usage.promptTokens).toBeGreaterThan(plain.usage.promptTokens + 50);
  });

  it('toolChoice "required": every sampled answer is calls of the tools, with arguments of their schemas', async () => {
    let calls = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const result = await model
        .chat(messages, { ...sampling, seed, tools: [weather, add], toolChoice: "required", parallelToolCalls: seed % 2 === 0 })
        .catch((error: unknown) => {
          // Cut off by maxTokens inside a call: the error carries the result.
          expect(error).toBeInstanceOf(StructuredOutputError);
          expect((error as StructuredOutputError).result?.finishReason).toBe("length");
          return undefined;
        });
      if (!result) continue;
      expect(result.toolCalls.length).toBeGreaterThan(0);
      if (seed % 2 === 1) expect(result.toolCalls.length).toBe(1);
      expect(result.answer).toBe("");
      for (const call of result.toolCalls) {
        expect(call.id).toMatch(/^call_[0-9a-z]+$/);
        checkArguments(call.name, call.arguments);
        calls++;
      }
      expect(new Set(result.toolCalls.map((call) => call.id)).size).toBe(result.toolCalls.length);
    }
    expect(calls).toBeGreaterThanOrEqual(4);
  });

  it("a named toolChoice calls that function once; a chat session takes tools too", async () => {
    for (let seed = 1; seed <= 3; seed++) {
      const result = await model.chat(messages, { ...sampling, seed, tools: [weather, add], toolChoice: { name: "add" } });
      expect(result.finishReason).toBe("stop");
      expect(result.toolCalls.map((call) => call.name)).toEqual(["add"]);
      checkArguments("add", result.toolCalls[0]!.arguments);
      // The raw text is the call as Qwen3's template writes one.
      expect(result.text).toMatch(/^<tool_call>\n\{"name": "add", "arguments": \{.*\}\s*\}\n<\/tool_call>$/s);
    }
    const session = model.createChatSession();
    const stream = session.send("Add 2 and 3", { ...sampling, seed: 5, tools: [add], toolChoice: "required", parallelToolCalls: false });
    for await (const _chunk of stream) {
      // the result resolves once the stream is read
    }
    const turn = await stream.result;
    expect(turn.toolCalls.map((call) => call.name)).toEqual(["add"]);
    session.dispose();
  });

  it('"auto" takes calls out of the answer only when the model writes them; "none" leaves the text alone', async () => {
    const auto = await model.chat(messages, { temperature: 0, maxTokens: 16, tools: [weather] });
    const none = await model.chat(messages, { temperature: 0, maxTokens: 16, tools: [weather], toolChoice: "none" });
    expect(none.text).toBe(auto.text); // same prompt, same greedy tokens
    expect(none.toolCalls).toEqual([]);
    expect(auto.toolCalls.length === 0 ? auto.answer : "").toBe(auto.toolCalls.length === 0 ? none.answer : "");
  });

  it('"auto": once the model opens a call, the grammar makes it a well-formed call of the tools', async () => {
    const open = model.tokenizer.encode("<tool_call>", { special: true });
    expect(open.length).toBe(1); // one added token in Qwen3's vocabulary
    // The bias makes this random model open a call at once; what follows is up to the grammar.
    const logitBias = { [open[0]!]: 100 };
    for (let seed = 1; seed <= 4; seed++) {
      const result = await model.chat(messages, { ...sampling, seed, logitBias, tools: [weather, add], parallelToolCalls: false, enableThinking: false });
      expect(result.finishReason).toBe("stop");
      expect(result.toolCalls.length).toBe(1);
      checkArguments(result.toolCalls[0]!.name, result.toolCalls[0]!.arguments);
      expect(result.answer).toBe("");
    }
    // "none" leaves the model alone: the biased token repeats, and no call is taken out.
    const none = await model.chat(messages, { ...sampling, maxTokens: 6, seed: 1, logitBias, tools: [weather], toolChoice: "none", enableThinking: false });
    expect(none.text).toBe("<tool_call>".repeat(6));
    expect(none.toolCalls).toEqual([]);
  });

  it('"auto": a call opened inside the leading think block is not constrained (nor taken out)', async () => {
    const [think] = model.tokenizer.encode("<think>", { special: true });
    const [open] = model.tokenizer.encode("<tool_call>", { special: true });
    // Greedy, the biases and a penalty on the last token alternate the two: <think><tool_call><think>…
    const options = { temperature: 0, maxTokens: 6, logitBias: { [think!]: 100, [open!]: 90 }, repeatPenalty: 1.5, penaltyLastN: 1, tools: [weather] };
    const none = await model.chat(messages, { ...options, toolChoice: "none" });
    expect(none.text).toBe("<think><tool_call>".repeat(3));
    const auto = await model.chat(messages, options);
    expect(auto.text).toBe(none.text);
    expect(auto.toolCalls).toEqual([]);
  });

  it("grammarTrigger: free text until the trigger, then the grammar; it needs a grammar", async () => {
    const grammar = 'root ::= "Hello: " [0-9] [0-9]';
    const trigger = model.tokenizer.encode("Hello", { special: true });
    expect(trigger.length).toBe(1);
    // The bias makes the trigger the first token (free text before it: @memra/sampler's triggered-sampler tests).
    const result = await model.complete("Say it", { ...sampling, seed: 3, maxTokens: 40, grammar, grammarTrigger: "Hello", logitBias: { [trigger[0]!]: 100 } });
    expect(result.text).toMatch(/^Hello: [0-9]{2}$/);
    expect(result.finishReason).toBe("stop");
    expect(result.value).toBe(result.text);
    await expect(model.complete("x", { grammarTrigger: "A" })).rejects.toThrow(/grammarTrigger needs a grammar/);
  });

  it("bad tool options are errors naming the option", async () => {
    await expect(model.chat(messages, { toolChoice: "required" })).rejects.toThrow(InvalidOptionError);
    await expect(model.chat(messages, { tools: [weather], toolChoice: { name: "nope" } })).rejects.toThrow(/not among the tools \(get_weather\)/);
    await expect(model.chat(messages, { tools: [weather], toolChoice: "required", grammar: 'root ::= "x"' })).rejects.toThrow(/without grammar/);
    const patterned = { type: "function" as const, function: { name: "f", parameters: { type: "object", properties: { id: { type: "string", pattern: "(?=a)a+" } } } } };
    await expect(model.chat(messages, { tools: [weather, patterned], toolChoice: "required" })).rejects.toThrow("/tools/1/function/parameters/properties/id/pattern");
    await expect(model.chat(messages, { tools: [{ type: "function", function: { name: "has space" } }] })).rejects.toThrow(/function name/);
  });
});
