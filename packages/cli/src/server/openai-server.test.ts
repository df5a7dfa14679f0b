/**
 * memra serve against the official `openai` client, on a synthetic model with the real Qwen3
 * vocabulary (reference backend, so the test needs no native build).
 */
import { type Model, infillPromptTokens, loadModel } from "@memra/core";
import { resolveOptions, syntheticLoraFile, syntheticModelFile } from "@memra/synthetic";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoModelPath } from "../default-model";
import { parseLoraModules, readApiKeys } from "../commands/serve";
import { type OpenAIServer, startOpenAIServer } from "./openai-server";

let model: Model;
let server: OpenAIServer;
let client: OpenAI;

beforeAll(async () => {
  model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })), { maxSequences: 4, kvCacheTokens: 4 * 512 });
  server = startOpenAIServer({ model, modelId: "tiny-q8_0.gguf", port: 0, contextLength: 512 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

afterAll(async () => {
  await server.stop();
  model.dispose();
});

const messages = [{ role: "user" as const, content: "Say hello" }];

/** Waits until the engine holds no blocks (a cancelled request releases them as its stream ends). */
async function blocksReleased(): Promise<number> {
  for (let i = 0; i < 100 && model.engine.pool.usedBlocks > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return model.engine.pool.usedBlocks;
}

describe("memra serve with the openai client", () => {
  it("lists the model and answers /health and /metrics", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["tiny-q8_0.gguf"]);
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: "ok" });
    // llama.cpp server's routes without /v1 (and /v1/health) answer as the others do.
    expect(await (await fetch(`${server.url}/v1/health`)).json()).toEqual({ status: "ok" });
    expect(((await (await fetch(`${server.url}/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(["tiny-q8_0.gguf"]);
    const unversioned = await fetch(`${server.url}/chat/completions`, { method: "POST", body: JSON.stringify({ messages, max_tokens: 3, temperature: 0 }) });
    expect(((await unversioned.json()) as { object: string }).object).toBe("chat.completion");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^memra_kv_blocks_free \d+$/m);
    expect(metrics).toMatch(/^memra_queue_waiting 0$/m);
  });

  it("chat completion, whole and streamed, gives the greedy tokens model.generate gives", async () => {
    const expected = await model.chat(messages, { temperature: 0, maxTokens: 12 });
    const whole = await client.chat.completions.create({ model: "tiny-q8_0.gguf", messages, temperature: 0, max_tokens: 12 });
    expect(whole.choices[0]!.message.content).toBe(expected.text);
    expect(whole.choices[0]!.finish_reason).toBe(expected.finishReason === "length" ? "length" : "stop");
    expect(whole.usage).toMatchObject({ prompt_tokens: expected.usage.promptTokens, completion_tokens: expected.usage.completionTokens });

    const stream = await client.chat.completions.create({ messages, temperature: 0, max_tokens: 12, stream: true, stream_options: { include_usage: true }, model: "x" });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(expected.text);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage?.completion_tokens).toBe(expected.usage.completionTokens);
  });

  it("n choices: each what its own request with seed + i gives, whole and streamed; usage counts the prompt once", async () => {
    const base = { model: "m", prompt: "Once upon a time", max_tokens: 10, temperature: 0.9, seed: 7 };
    const many = await client.completions.create({ ...base, n: 3 });
    expect(many.choices.map((choice) => choice.index)).toEqual([0, 1, 2]);
    const singles = await Promise.all([0, 1, 2].map((i) => client.completions.create({ ...base, seed: 7 + i })));
    expect(many.choices.map((choice) => choice.text)).toEqual(singles.map((single) => single.choices[0]!.text));
    expect(new Set(many.choices.map((choice) => choice.text)).size).toBeGreaterThan(1);
    expect(many.usage).toMatchObject({ prompt_tokens: singles[0]!.usage!.prompt_tokens, completion_tokens: singles.reduce((sum, single) => sum + single.usage!.completion_tokens, 0) });
    // More choices than the engine's 4 sequences: the rest wait their turn.
    const five = await client.completions.create({ ...base, max_tokens: 4, n: 5 });
    expect(five.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3, 4]);
    expect(five.choices[4]!.text).toBe((await client.completions.create({ ...base, max_tokens: 4, seed: 11 })).choices[0]!.text);

    const chat = { model: "m", messages, max_tokens: 10, temperature: 1, seed: 3, n: 3 };
    const whole = await client.chat.completions.create(chat);
    const stream = await client.chat.completions.create({ ...chat, stream: true, stream_options: { include_usage: true } });
    const contents = ["", "", ""];
    const reasonings = ["", "", ""];
    const finishes: string[][] = [[], [], []];
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        contents[choice.index] += choice.delta.content ?? "";
        reasonings[choice.index] += (choice.delta as { reasoning_content?: string }).reasoning_content ?? "";
        if (choice.finish_reason) finishes[choice.index]!.push(choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(contents).toEqual(whole.choices.map((choice) => choice.message.content ?? ""));
    expect(reasonings).toEqual(whole.choices.map((choice) => (choice.message as { reasoning_content?: string }).reasoning_content ?? ""));
    expect(finishes).toEqual(whole.choices.map((choice) => [choice.finish_reason]));
    expect(usage?.completion_tokens).toBe(whole.usage!.completion_tokens);
    // The later choices start from the first one's prompt blocks (the prefix cache), not evaluating the prompt again.
    const long = "Once upon a time there was a model that wrote stories. ".repeat(8);
    const promptTokens = model.tokenizer.encode(long).length;
    const fullBlocks = Math.floor((promptTokens - 1) / model.engine.pool.blockTokens) * model.engine.pool.blockTokens;
    expect(fullBlocks).toBeGreaterThan(0);
    const reusedBefore = model.engine.statistics.reusedTokens;
    const shared = await client.completions.create({ ...base, prompt: long, max_tokens: 2, n: 3 });
    expect(shared.choices.length).toBe(3);
    expect(model.engine.statistics.reusedTokens - reusedBefore).toBeGreaterThanOrEqual(2 * fullBlocks);
    const tooMany = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...base, n: 17 }) });
    expect(tooMany.status).toBe(400);
    expect((await tooMany.json()).error).toMatchObject({ param: "n", message: expect.stringContaining("at most 16") });
    expect(await blocksReleased()).toBe(0);
  });

  it("completions with stop, seed and logprobs; chat with top_logprobs", async () => {
    const first = await client.completions.create({ model: "m", prompt: "Once upon a time", max_tokens: 10, temperature: 0.9, seed: 7, logprobs: 3 });
    const again = await client.completions.create({ model: "m", prompt: "Once upon a time", max_tokens: 10, temperature: 0.9, seed: 7, logprobs: 3 });
    expect(again.choices[0]!.text).toBe(first.choices[0]!.text);
    const logprobs = first.choices[0]!.logprobs!;
    expect(logprobs.tokens!.length).toBe(first.usage!.completion_tokens);
    expect(logprobs.token_logprobs!.every((lp) => lp <= 0)).toBe(true);
    expect(Object.keys(logprobs.top_logprobs![0]!).length).toBeGreaterThan(0);

    const text = first.choices[0]!.text;
    const stopAt = text.slice(3, 5);
    if (stopAt.length === 2 && text.indexOf(stopAt) === 3) {
      const stopped = await client.completions.create({ model: "m", prompt: "Once upon a time", max_tokens: 10, temperature: 0.9, seed: 7, stop: [stopAt] });
      expect(stopped.choices[0]!.text).toBe(text.slice(0, 3));
      expect(stopped.choices[0]!.finish_reason).toBe("stop");
    }

    const chat = await client.chat.completions.create({ model: "m", messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
    const content = chat.choices[0]!.logprobs!.content!;
    expect(content.length).toBe(chat.usage!.completion_tokens - (chat.choices[0]!.finish_reason === "stop" ? 1 : 0));
    expect(content[0]!.top_logprobs).toHaveLength(3);
    expect(content[0]!.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(content[0]!.logprob);
  });

  it("response_format json_schema: every sampled answer parses and validates", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 12 }, age: { type: "integer", minimum: 0, maximum: 120 }, tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 } },
      required: ["name", "age", "tags"],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const answer = await client.chat.completions.create({
        model: "x",
        messages,
        temperature: 1,
        seed,
        max_tokens: 200,
        response_format: { type: "json_schema", json_schema: { name: "person", schema } },
      });
      const value = JSON.parse(answer.choices[0]!.message.content!);
      expect(Object.keys(value).sort()).toEqual(["age", "name", "tags"]);
      expect(typeof value.name).toBe("string");
      expect(value.name.length).toBeLessThanOrEqual(12);
      expect(Number.isInteger(value.age) && value.age >= 0 && value.age <= 120).toBe(true);
      expect(value.tags.every((tag: string) => tag === "a" || tag === "b")).toBe(true);
    }
    const bad = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "(?=a)a+" } } } }),
    });
    expect(bad.status).toBe(400);
    const body = await bad.json();
    expect(body.error.param).toBe("response_format");
    expect(body.error.message).toMatch(/pattern/);
  });

  it("logit_bias: +100 makes a token the greedy pick, -100 and false ban it; bad keys are a 400", async () => {
    const prompt = "Once upon a time";
    const tokensOf = async (extra: Record<string, unknown>) => {
      const answer = await client.completions.create({ model: "m", prompt, max_tokens: 4, temperature: 0, logprobs: 1, ...extra });
      return answer.choices[0]!.logprobs!.tokens!;
    };
    const plain = await tokensOf({});
    const first = model.tokenizer.encode(plain[0]!, { special: true });
    expect(first.length).toBe(1);
    const favoured = (first[0]! + 1000) % model.vocabularySize;
    const forced = await tokensOf({ logit_bias: { [favoured]: 100 } });
    expect(forced).toEqual(Array(4).fill(model.tokenizer.decode([favoured])));
    for (const ban of [-100, false]) {
      const banned = await tokensOf({ logit_bias: { [first[0]!]: ban } });
      expect(banned[0]).not.toBe(plain[0]);
      expect(banned).not.toContain(plain[0]);
    }
    // llama.cpp's [[id, bias]] pairs mean the same.
    expect(await tokensOf({ logit_bias: [[favoured, 100]] })).toEqual(forced);
    const badBiases: Record<string, number>[] = [{ hello: 5 }, { [model.vocabularySize]: 5 }, { 1: 101 }];
    for (const logit_bias of badBiases) {
      await expect(client.completions.create({ model: "m", prompt, max_tokens: 2, logit_bias })).rejects.toMatchObject({ status: 400, error: { param: expect.stringMatching(/^logit_bias/) } });
    }
  });

  it("penalties, top_k, min_p, typical_p, XTC and DRY reach the sampler as model.generate takes them", async () => {
    const prompt = model.tokenizer.encode("The the the the the the", { special: true });
    const request = {
      presence_penalty: 0.8,
      frequency_penalty: 0.6,
      repeat_penalty: 1.3,
      repeat_last_n: 32,
      top_k: 12,
      min_p: 0.02,
      typical_p: 0.95,
      xtc_probability: 0.5,
      xtc_threshold: 0.2,
      dry_multiplier: 0.8,
      dry_base: 1.5,
      dry_allowed_length: 1,
      dry_penalty_last_n: 64,
      dry_sequence_breakers: ["\n"],
    };
    const options = {
      presencePenalty: 0.8,
      frequencyPenalty: 0.6,
      repeatPenalty: 1.3,
      penaltyLastN: 32,
      topK: 12,
      minP: 0.02,
      typicalP: 0.95,
      xtc: { probability: 0.5, threshold: 0.2 },
      dry: { multiplier: 0.8, base: 1.5, allowedLength: 1, penaltyLastN: 64, sequenceBreakers: ["\n"] },
    };
    const differing: string[] = [];
    for (const seed of [3, 4]) {
      const served = await client.completions.create({ model: "m", prompt, max_tokens: 16, temperature: 0.9, top_p: 0.97, seed, ...request } as OpenAI.CompletionCreateParamsNonStreaming);
      const expected = await model.complete(prompt, { maxTokens: 16, temperature: 0.9, topP: 0.97, seed, ...options });
      expect(served.choices[0]!.text).toBe(expected.text);
      const plain = await model.complete(prompt, { maxTokens: 16, temperature: 0.9, topP: 0.97, seed });
      if (plain.text !== expected.text) differing.push(plain.text);
    }
    // The options change the output (so the comparison above cannot pass with them ignored).
    expect(differing.length).toBeGreaterThan(0);
    // top_k 1 at any temperature is the greedy pick; vLLM's top_k -1 is "off", as 0 is.
    const greedy = await client.completions.create({ model: "m", prompt, max_tokens: 8, temperature: 0 });
    const topOne = await client.completions.create({ model: "m", prompt, max_tokens: 8, temperature: 1.5, seed: 9, top_k: 1 } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(topOne.choices[0]!.text).toBe(greedy.choices[0]!.text);
    const off = await client.completions.create({ model: "m", prompt, max_tokens: 8, temperature: 1.5, seed: 9, top_k: -1 } as OpenAI.CompletionCreateParamsNonStreaming);
    const zero = await client.completions.create({ model: "m", prompt, max_tokens: 8, temperature: 1.5, seed: 9, top_k: 0 } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(off.choices[0]!.text).toBe(zero.choices[0]!.text);
    await expect(
      client.completions.create({ model: "m", prompt, max_tokens: 2, repeat_penalty: 1.1, repetition_penalty: 1.2 } as OpenAI.CompletionCreateParamsNonStreaming),
    ).rejects.toMatchObject({ status: 400, error: { param: "repetition_penalty" } });
    await expect(client.completions.create({ model: "m", prompt, max_tokens: 2, min_p: 2 } as OpenAI.CompletionCreateParamsNonStreaming)).rejects.toMatchObject({ status: 400, error: { param: "min_p" } });
  });

  it("llama.cpp's top_n_sigma, mirostat, mirostat_tau and mirostat_eta reach the sampler (/v1/completions, /v1/chat/completions, /completion)", async () => {
    const prompt = "Once upon a time";
    const cases: [object, object][] = [
      [{ mirostat: 2, mirostat_tau: 3, mirostat_eta: 0.3 }, { mirostat: { mode: 2, tau: 3, eta: 0.3 } }],
      [{ mirostat: 1 }, { mirostat: { mode: 1 } }],
      [{ top_n_sigma: 0.5 }, { topNSigma: 0.5 }],
    ];
    const plain = await model.complete(prompt, { maxTokens: 12, temperature: 1.2, topP: 1, seed: 5 });
    let differing = 0;
    for (const [fields, options] of cases) {
      const expected = await model.complete(prompt, { maxTokens: 12, temperature: 1.2, topP: 1, seed: 5, ...options });
      if (expected.text !== plain.text) differing++;
      const served = await client.completions.create({ model: "m", prompt, max_tokens: 12, temperature: 1.2, seed: 5, ...fields } as OpenAI.CompletionCreateParamsNonStreaming);
      expect(served.choices[0]!.text).toBe(expected.text);
      const native = await fetch(`${server.url}/completion`, { method: "POST", body: JSON.stringify({ prompt, n_predict: 12, temperature: 1.2, top_p: 1, seed: 5, ...fields }) });
      expect(((await native.json()) as { content: string }).content).toBe(expected.text);
    }
    expect(differing).toBeGreaterThanOrEqual(2);
    const messages = [{ role: "user" as const, content: "Hi" }];
    const chat = await client.chat.completions.create({ model: "m", messages, max_tokens: 8, temperature: 1.2, seed: 5, mirostat: 2, top_n_sigma: 1 } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const answer = await model.chat(messages, { maxTokens: 8, temperature: 1.2, topP: 1, seed: 5, mirostat: { mode: 2 }, topNSigma: 1 });
    expect(chat.choices[0]!.message.content).toBe(answer.answer);
    for (const [field, value] of [
      ["mirostat", 3],
      ["mirostat_tau", 0],
      ["mirostat_eta", -1],
    ] as const) {
      await expect(client.completions.create({ model: "m", prompt, max_tokens: 2, [field]: value } as OpenAI.CompletionCreateParamsNonStreaming)).rejects.toMatchObject({ status: 400, error: { param: field } });
    }
  });

  const weatherTool = {
    type: "function" as const,
    function: {
      name: "get_weather",
      description: "Current weather of a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"], additionalProperties: false },
    },
  };
  const addTool = {
    type: "function" as const,
    function: { name: "add", parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 9 }, b: { type: "integer", minimum: 0, maximum: 9 } }, required: ["a", "b"] } },
  };
  const checkCall = (call: { function: { name: string; arguments: string } }) => {
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === "get_weather") {
      expect(Object.keys(args)).toEqual(["city"]);
      expect(args.city.length).toBeLessThanOrEqual(10);
    } else {
      expect(call.function.name).toBe("add");
      expect(Number.isInteger(args.a) && Number.isInteger(args.b)).toBe(true);
    }
  };

  it("tools: a forced tool_choice answers with tool_calls, whole and streamed, as model.chat does", async () => {
    const tools = [weatherTool, addTool];
    let answered = 0;
    for (const seed of [1, 2, 3, 4]) {
      const request = { model: "m", messages, tools, tool_choice: "required" as const, temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed, max_tokens: 120 };
      const whole = await client.chat.completions.create(request as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const choice = whole.choices[0]!;
      const expected = await model
        .chat(messages, { tools, toolChoice: "required", temperature: 1, topK: 0, topP: 1, minP: 0, seed, maxTokens: 120, enableThinking: false })
        .catch(() => undefined);
      if (choice.finish_reason === "length") {
        expect(expected).toBeUndefined(); // cut off inside a call: model.chat throws, the server says "length"
        continue;
      }
      answered++;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBeNull();
      const calls = choice.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(calls.map((call) => [call.function.name, call.function.arguments])).toEqual(expected!.toolCalls.map((call) => [call.name, call.arguments]));
      for (const call of calls) {
        expect(call.type).toBe("function");
        expect(call.id).toMatch(/^call_/);
        checkCall(call);
      }

      const stream = await client.chat.completions.create({ ...request, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
      const streamed: { id?: string; name?: string; arguments: string }[] = [];
      let content = "";
      let finish: string | null = null;
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        content += delta?.content ?? "";
        for (const part of delta?.tool_calls ?? []) {
          streamed[part.index] ??= { arguments: "" };
          if (part.id) streamed[part.index]!.id = part.id;
          if (part.function?.name) streamed[part.index]!.name = part.function.name;
          streamed[part.index]!.arguments += part.function?.arguments ?? "";
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(content).toBe("");
      expect(finish).toBe("tool_calls");
      expect(streamed.map((call) => [call.name, call.arguments])).toEqual(calls.map((call) => [call.function.name, call.function.arguments]));
      expect(streamed.every((call) => call.id?.startsWith("call_"))).toBe(true);
    }
    expect(answered).toBeGreaterThanOrEqual(2);

    const named = await client.chat.completions.create({ model: "m", messages, tools, tool_choice: { type: "function", function: { name: "add" } }, temperature: 1, seed: 5, max_tokens: 120 });
    const namedCalls = named.choices[0]!.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(namedCalls.map((call) => call.function.name)).toEqual(["add"]);
    checkCall(namedCalls[0]!);
  });

  it("tools: a conversation with an assistant's tool_calls and the tool's answer renders as Qwen3's template writes it", async () => {
    const history = [
      { role: "user" as const, content: "Weather in Oslo?" },
      { role: "assistant" as const, content: null, tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: '{"city": "Oslo"}' } }] },
      { role: "tool" as const, tool_call_id: "call_1", content: '{"celsius": -3}' },
    ];
    const answer = await client.chat.completions.create({ model: "m", messages: history, tools: [weatherTool], temperature: 0, max_tokens: 4 });
    const rendered = model.tokenizer.applyChatTemplate(
      [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo"}' } }] },
        { role: "tool", content: '{"celsius": -3}', tool_call_id: "call_1" },
      ],
      { addGenerationPrompt: true, tools: [weatherTool] },
    );
    expect(rendered).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>');
    expect(rendered).toContain("<tool_response>\n{\"celsius\": -3}\n</tool_response>");
    expect(answer.usage!.prompt_tokens).toBe(model.tokenizer.encode(rendered, { special: true }).length);
    // "auto" on this random model writes no call: the text is all content, finish "stop" or "length".
    expect(["stop", "length"]).toContain(answer.choices[0]!.finish_reason);
  });

  it("tools and response_format cut off by max_tokens end with finish_reason length, not an error", async () => {
    const cut = await client.chat.completions.create({ model: "m", messages, tools: [weatherTool], tool_choice: "required", max_tokens: 3, temperature: 0 });
    expect(cut.choices[0]!.finish_reason).toBe("length");
    expect(cut.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(cut.usage!.completion_tokens).toBe(3);
    const schema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };
    const json = await client.chat.completions.create({ model: "m", messages, max_tokens: 2, temperature: 0, response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    expect(json.choices[0]!.finish_reason).toBe("length");
    expect(json.choices[0]!.message.content!.startsWith("{")).toBe(true);
    const stream = await client.chat.completions.create({ model: "m", messages, max_tokens: 2, temperature: 0, stream: true, response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    let finish: string | null = null;
    let text = "";
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("length");
    expect(text).toBe(json.choices[0]!.message.content);
  });

  it("bad tool requests are 400s naming the field", async () => {
    const post = async (body: Record<string, unknown>) => {
      const response = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages, ...body }) });
      return { status: response.status, error: ((await response.json()) as { error: { param: string | null; message: string } }).error };
    };
    expect(await post({ tools: [weatherTool], tool_choice: { type: "function", function: { name: "nope" } } })).toMatchObject({ status: 400, error: { param: "tool_choice", message: expect.stringContaining("not among the tools") } });
    expect(await post({ tool_choice: "required" })).toMatchObject({ status: 400, error: { param: "tool_choice" } });
    expect(await post({ tools: [{ type: "function", function: { name: "bad name" } }] })).toMatchObject({ status: 400, error: { param: "tools.0.function.name" } });
    expect(await post({ tools: [weatherTool, weatherTool] })).toMatchObject({ status: 400, error: { param: "tools.1.function.name" } });
    const patterned = { type: "function", function: { name: "f", parameters: { type: "object", properties: { id: { type: "string", pattern: "(?=a)a+" } } } } };
    expect(await post({ tools: [patterned], tool_choice: "required" })).toMatchObject({ status: 400, error: { param: "tools", message: expect.stringContaining("/tools/0/function/parameters/properties/id/pattern") } });
    expect(await post({ tools: [weatherTool], tool_choice: "required", response_format: { type: "json_object" } })).toMatchObject({ status: 400, error: { param: "tool_choice" } });
    expect(await post({ functions: [{ name: "f" }] })).toMatchObject({ status: 400, error: { param: "functions" } });
  });

  it("bad requests get 400 with an OpenAI error body, and the server keeps serving", async () => {
    await expect(client.chat.completions.create({ model: "m", messages, temperature: 5 })).rejects.toMatchObject({ status: 400, error: { param: "temperature" } });
    await expect(client.chat.completions.create({ model: "m", messages: [] })).rejects.toMatchObject({ status: 400 });
    await expect(client.completions.create({ model: "m", prompt: "hi", max_tokens: 100_000 })).rejects.toMatchObject({ status: 400, error: { param: "max_tokens" } });
    await expect(client.completions.create({ model: "m", prompt: [999_999_999] })).rejects.toMatchObject({ status: 400, error: { param: "prompt" } });
    const malformed = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", body: "{not json" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { type: "invalid_request_error", message: "the request body is not valid JSON" } });
    expect((await fetch(`${server.url}/v1/nothing`)).status).toBe(404);
    expect((await fetch(`${server.url}/v1/completions`)).status).toBe(405);
    const ok = await client.completions.create({ model: "m", prompt: "hi", max_tokens: 2, temperature: 0 });
    expect(ok.choices[0]!.finish_reason).toBeDefined();
  });

  it("runs concurrent streams; a client that disconnects frees its blocks and the others complete", async () => {
    const abort = new AbortController();
    const cancelled = (async () => {
      const stream = await client.chat.completions.create({ model: "m", messages, max_tokens: 200, temperature: 1, stream: true }, { signal: abort.signal });
      let chunks = 0;
      try {
        for await (const _ of stream) if (++chunks === 3) abort.abort();
      } catch {
        // the abort ends the iteration with an error
      }
      return chunks;
    })();
    const others = Array.from({ length: 3 }, (_, i) =>
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: `Count to ${i + 3}` }], max_tokens: 16, temperature: 0 }),
    );
    expect(await cancelled).toBeGreaterThanOrEqual(3);
    for (const result of await Promise.all(others)) expect(result.usage!.completion_tokens).toBeGreaterThan(0);
    expect(await blocksReleased()).toBe(0);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/memra_requests_total\{endpoint="\/v1\/chat\/completions",status="aborted"\} 1/);
  });
});

describe("memra serve: API keys (llama.cpp's and vLLM's --api-key) and /apply-template", () => {
  let guarded: OpenAIServer;
  beforeAll(() => {
    guarded = startOpenAIServer({ model, modelId: "tiny-q8_0.gguf", port: 0, contextLength: 512, apiKeys: ["first-key", "second-key"] });
  });
  afterAll(async () => {
    await guarded.stop();
  });
  const body = JSON.stringify({ prompt: "Hello", max_tokens: 2, temperature: 0 });

  it("asks every route but /health and /v1/models for a key, by Authorization: Bearer or X-Api-Key", async () => {
    const completions = `${guarded.url}/v1/completions`;
    expect((await fetch(`${guarded.url}/health`)).status).toBe(200);
    expect((await fetch(`${guarded.url}/v1/models`)).status).toBe(200);
    for (const headers of <Record<string, string>[]>[{}, { authorization: "Bearer wrong-key" }, { authorization: "Bearer first-ke" }, { "x-api-key": "second-key2" }, { authorization: "Basic first-key" }]) {
      const refused = await fetch(completions, { method: "POST", body, headers });
      expect(refused.status, JSON.stringify(headers)).toBe(401);
      expect(((await refused.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    }
    expect((await fetch(`${guarded.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${guarded.url}/tokenize`, { method: "POST", body: JSON.stringify({ content: "a" }) })).status).toBe(401);
    expect((await fetch(completions, { method: "POST", body, headers: { authorization: "Bearer second-key" } })).status).toBe(200);
    expect((await fetch(completions, { method: "POST", body, headers: { "x-api-key": "first-key" } })).status).toBe(200);
    expect((await fetch(completions, { method: "OPTIONS" })).status).toBeLessThan(300);
    // The official client sends its apiKey as a bearer token.
    const keyed = new OpenAI({ baseURL: `${guarded.url}/v1`, apiKey: "first-key", maxRetries: 0 });
    const expected = await model.complete("Hello", { temperature: 0, maxTokens: 2 });
    expect((await keyed.completions.create({ model: "x", prompt: "Hello", max_tokens: 2, temperature: 0 })).choices[0]!.text).toBe(expected.text);
    const unkeyed = new OpenAI({ baseURL: `${guarded.url}/v1`, apiKey: "nope", maxRetries: 0 });
    await expect(unkeyed.completions.create({ model: "x", prompt: "Hello", max_tokens: 2 })).rejects.toThrow(/401/);
    expect(() => startOpenAIServer({ model, modelId: "x", port: 0, contextLength: 512, apiKeys: [""] })).toThrow(/must not be empty/);
  });

  it("--api-key and --api-key-file give the keys; a bad one is named", () => {
    const directory = mkdtempSync(join(tmpdir(), "memra-keys-"));
    const file = join(directory, "keys");
    writeFileSync(file, "# keys\nalpha\n\n  beta  \n");
    expect(readApiKeys("one, two", file)).toEqual(["one", "two", "alpha", "beta"]);
    expect(readApiKeys(undefined, undefined)).toEqual([]);
    expect(() => readApiKeys(" , ", undefined)).toThrow(/--api-key is empty/);
    writeFileSync(file, "# none\n");
    expect(() => readApiKeys(undefined, file)).toThrow(/holds no key/);
    expect(() => readApiKeys(undefined, join(directory, "missing"))).toThrow(/--api-key-file ".*missing"/);
    rmSync(directory, { recursive: true, force: true });
  });

  it("/apply-template renders messages as a chat completion's prompt", async () => {
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }];
    const response = await fetch(`${server.url}/apply-template`, { method: "POST", body: JSON.stringify({ messages }) });
    const { prompt } = (await response.json()) as { prompt: string };
    expect(prompt).toBe(model.tokenizer.applyChatTemplate(messages as never, { addGenerationPrompt: true, enableThinking: true }));
    const tokenized = (await (await fetch(`${server.url}/tokenize`, { method: "POST", body: JSON.stringify({ messages }) })).json()) as { tokens: number[] };
    expect(tokenized.tokens).toEqual(model.tokenizer.encode(prompt, { special: true }));
    const noThinking = (await (await fetch(`${server.url}/apply-template`, { method: "POST", body: JSON.stringify({ messages, chat_template_kwargs: { enable_thinking: false } }) })).json()) as { prompt: string };
    expect(noThinking.prompt).toContain("<think>\n\n</think>");
    expect((await fetch(`${server.url}/apply-template`, { method: "POST", body: JSON.stringify({ messages: [] }) })).status).toBe(400);
  });
});

describe("memra serve: llama-server's command-line defaults (--temp ..., -n, -rea off, --reasoning-format)", () => {
  let defaulted: OpenAIServer;
  beforeAll(() => {
    defaulted = startOpenAIServer({
      model,
      modelId: "tiny-q8_0.gguf",
      port: 0,
      contextLength: 512,
      defaults: { sampling: { temperature: 0, presencePenalty: 0.5, dry: { multiplier: 0.8, base: 1.5 } }, maxTokens: 5, enableThinking: false, reasoningFormat: "none" },
    });
  });
  afterAll(async () => {
    await defaulted.stop();
  });
  const post = async (base: string, path: string, body: object) => (await fetch(`${base}${path}`, { method: "POST", body: JSON.stringify(body) })).json() as Promise<Record<string, any>>;

  it("a request that leaves a field out gets the server's default; one that gives it keeps its own", async () => {
    const chat = { messages: [{ role: "user", content: "Say hello" }] };
    const got = await post(defaulted.url, "/v1/chat/completions", chat);
    const explicit = await post(server.url, "/v1/chat/completions", { ...chat, temperature: 0, presence_penalty: 0.5, dry_multiplier: 0.8, dry_base: 1.5, max_tokens: 5, chat_template_kwargs: { enable_thinking: false }, reasoning_format: "none" });
    expect(got.usage.completion_tokens).toBe(5);
    expect(got.usage.prompt_tokens).toBe(explicit.usage.prompt_tokens);
    expect(got.choices[0].message.content).toBe(explicit.choices[0].message.content);
    // the default server thinks: another prompt
    const thinking = await post(server.url, "/v1/chat/completions", { ...chat, temperature: 0, max_tokens: 5 });
    expect(thinking.usage.prompt_tokens).not.toBe(got.usage.prompt_tokens);
    // /completion: n_predict and the sampling defaults too, and a request's own n_predict wins
    const completion = await post(defaulted.url, "/completion", { prompt: "Once upon" });
    const completionExplicit = await post(server.url, "/completion", { prompt: "Once upon", n_predict: 5, temperature: 0, presence_penalty: 0.5, dry_multiplier: 0.8, dry_base: 1.5 });
    expect(completion.tokens_predicted).toBe(5);
    expect(completion.content).toBe(completionExplicit.content);
    expect((await post(defaulted.url, "/completion", { prompt: "Once upon", n_predict: 2 })).tokens_predicted).toBe(2);
  });

  it("a request giving one DRY field keeps the server's other DRY defaults, as llama-server reads each field over its default", async () => {
    const prompt = "The the the the the the the the";
    const differing: string[] = [];
    for (const seed of [3, 4]) {
      const request = { prompt, n_predict: 16, temperature: 0.9, seed, ignore_eos: true };
      const got = await post(defaulted.url, "/completion", { ...request, dry_allowed_length: 1 });
      const merged = await post(server.url, "/completion", { ...request, presence_penalty: 0.5, dry_multiplier: 0.8, dry_base: 1.5, dry_allowed_length: 1 });
      expect(got.content).toBe(merged.content);
      // the request's DRY group alone (the server's multiplier dropped: DRY off)
      const alone = await post(server.url, "/completion", { ...request, presence_penalty: 0.5, dry_allowed_length: 1 });
      if (alone.content !== merged.content) differing.push(alone.content);
    }
    expect(differing.length).toBeGreaterThan(0);
  });

  it("/props reports the server's defaults as llama-server's does", async () => {
    const props = (await (await fetch(`${defaulted.url}/props`)).json()) as { default_generation_settings: { params: Record<string, unknown> } };
    expect(props.default_generation_settings.params).toMatchObject({ n_predict: 5, temperature: 0, presence_penalty: 0.5, top_k: 40, dry_multiplier: 0.8, dry_base: 1.5, dry_penalty_last_n: 64 });
  });
});

describe("memra serve: OpenAI's Responses API (POST /v1/responses)", () => {
  const addTool: OpenAI.Responses.FunctionTool = { type: "function", name: "add", strict: false, parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 9 }, b: { type: "integer", minimum: 0, maximum: 9 } }, required: ["a", "b"] } };

  it("answers the openai client's responses.create as model.chat answers the same messages, whole and streamed", async () => {
    const expected = await model.chat([{ role: "system", content: "Be brief." }, ...messages], { temperature: 0, maxTokens: 12 });
    const response = await client.responses.create({ model: "m", instructions: "Be brief.", input: "Say hello", temperature: 0, max_output_tokens: 12 });
    expect(response.object).toBe("response");
    expect(response.id).toMatch(/^resp_/);
    expect(response.output_text).toBe(expected.answer);
    const reasoning = response.output.filter((item) => item.type === "reasoning");
    expect(reasoning.map((item) => (item.content ?? []).map((part) => part.text).join(""))).toEqual(expected.reasoning === "" ? [] : [expected.reasoning]);
    expect(response.status).toBe(expected.finishReason === "length" ? "incomplete" : "completed");
    if (response.status === "incomplete") expect(response.incomplete_details?.reason).toBe("max_output_tokens");
    expect(response.usage).toMatchObject({ input_tokens: expected.usage.promptTokens, output_tokens: expected.usage.completionTokens });

    const stream = await client.responses.create({ model: "m", instructions: "Be brief.", input: [{ role: "user", content: [{ type: "input_text", text: "Say hello" }] }], temperature: 0, max_output_tokens: 12, stream: true });
    const types: string[] = [];
    let text = "";
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toMatch(/^response\.(completed|incomplete)$/);
    expect(text).toBe(expected.answer);
    expect(final!.output.filter((item) => item.type === "message").map((item) => item.content.map((part) => (part.type === "output_text" ? part.text : "")).join(""))).toEqual(expected.answer === "" ? [] : [expected.answer]);
  });

  it("function tools: a forced call comes back as a function_call item; call and output items go back in as the chat's turns", async () => {
    // (seed: memra's, as vLLM's; not in OpenAI's types)
    const forced = await client.responses.create({ model: "m", input: "Add two digits", tools: [{ ...addTool, strict: true }], tool_choice: { type: "function", name: "add" }, temperature: 1, seed: 5, max_output_tokens: 120 } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    const calls = forced.output.filter((item) => item.type === "function_call");
    expect(calls).toHaveLength(1);
    const call = calls[0]!;
    expect(call.name).toBe("add");
    expect(call.call_id).toMatch(/^call_/);
    const args = JSON.parse(call.arguments) as { a: number; b: number };
    expect(Object.keys(args).sort()).toEqual(["a", "b"]);
    const expected = await model.chat([{ role: "user", content: "Add two digits" }], { tools: [{ type: "function", function: { name: "add", parameters: addTool.parameters! } }], toolChoice: { name: "add" }, temperature: 1, seed: 5, maxTokens: 120, enableThinking: false });
    expect([call.name, call.arguments]).toEqual([expected.toolCalls[0]!.name, expected.toolCalls[0]!.arguments]);

    // The next turn: the call and its output as input items render as an assistant turn with tool_calls and a tool turn.
    const followUp = await client.responses.create({
      model: "m",
      input: [{ role: "user", content: "Add two digits" }, { type: "function_call", call_id: call.call_id, name: "add", arguments: call.arguments }, { type: "function_call_output", call_id: call.call_id, output: "7" }],
      tools: [addTool],
      temperature: 0,
      max_output_tokens: 6,
    });
    const conversation = [
      { role: "user" as const, content: "Add two digits" },
      { role: "assistant" as const, content: "", tool_calls: [{ id: call.call_id, type: "function" as const, function: { name: "add", arguments: call.arguments } }] },
      { role: "tool" as const, tool_call_id: call.call_id, content: "7" },
    ];
    const answered = await model.chat(conversation, { tools: [{ type: "function", function: { name: "add", parameters: addTool.parameters! } }], temperature: 0, maxTokens: 6 });
    expect(followUp.usage!.input_tokens).toBe(answered.usage.promptTokens);
    expect(followUp.output_text).toBe(answered.answer);
  });

  it("previous_response_id continues a stored response as the whole conversation would; GET and DELETE /v1/responses/ID", async () => {
    const first = await client.responses.create({ model: "m", instructions: "Be brief.", input: "Name a colour", temperature: 0, max_output_tokens: 8, reasoning: { effort: "none" } });
    expect((first as unknown as { store: boolean }).store).toBe(true);
    const next = await client.responses.create({ model: "m", previous_response_id: first.id, input: "And another one?", temperature: 0, max_output_tokens: 8, reasoning: { effort: "none" } });
    expect(next.previous_response_id).toBe(first.id);
    // The same conversation sent whole (instructions are not carried over, as OpenAI's are not).
    const whole = await model.chat(
      [
        { role: "user", content: "Name a colour" },
        { role: "assistant", content: first.output_text },
        { role: "user", content: "And another one?" },
      ],
      { temperature: 0, maxTokens: 8, enableThinking: false },
    );
    expect(next.output_text).toBe(whole.answer);
    expect(next.usage!.input_tokens).toBe(whole.usage.promptTokens);
    // A third turn chains through both.
    const third = await client.responses.create({ model: "m", previous_response_id: next.id, input: "Thanks", temperature: 0, max_output_tokens: 4, reasoning: { effort: "none" } });
    expect(third.usage!.input_tokens).toBeGreaterThan(next.usage!.input_tokens);

    // GET /v1/responses/ID/input_items: the request's own input items, newest first (OpenAI's client reads them).
    const items = await client.responses.inputItems.list(next.id);
    expect(items.data.map((item) => ({ ...item, id: undefined }))).toEqual([{ id: undefined, type: "message", role: "user", status: "completed", content: [{ type: "input_text", text: "And another one?" }] }]);
    const many = await client.responses.create({
      model: "m",
      input: [
        { role: "user", content: "One" },
        { role: "assistant", content: "Two" },
        { role: "user", content: [{ type: "input_text", text: "Three" }] },
      ],
      max_output_tokens: 2,
    });
    const page = async (query: string) => (await (await fetch(`${server.url}/v1/responses/${many.id}/input_items?${query}`)).json()) as { data: { id: string; content: { type: string; text: string }[] }[]; first_id: string; last_id: string; has_more: boolean };
    const firstPage = await page("order=asc&limit=2");
    expect(firstPage.data.map((item) => item.content[0])).toEqual([
      { type: "input_text", text: "One" },
      { type: "output_text", text: "Two" },
    ]);
    expect([firstPage.first_id, firstPage.has_more]).toEqual([firstPage.data[0]!.id, true]);
    const rest = await page(`order=asc&after=${firstPage.last_id}`);
    expect([rest.data.map((item) => item.content[0]!.text), rest.has_more]).toEqual([["Three"], false]);
    expect((await page("")).data.map((item) => item.content[0]!.text)).toEqual(["Three", "Two", "One"]);
    const badLimit = await fetch(`${server.url}/v1/responses/${many.id}/input_items?limit=500`);
    expect([badLimit.status, ((await badLimit.json()) as { error: { param: string } }).error.param]).toEqual([400, "limit"]);
    expect((await fetch(`${server.url}/v1/responses/resp_unknown/input_items`)).status).toBe(404);

    expect((await client.responses.retrieve(first.id)).output_text).toBe(first.output_text);
    expect(await (await fetch(`${server.url}/v1/responses/${next.id}`, { method: "DELETE" })).json()).toEqual({ id: next.id, object: "response", deleted: true });
    const gone = await fetch(`${server.url}/v1/responses/${next.id}`);
    expect(gone.status).toBe(404);
    const unknown = await fetch(`${server.url}/v1/responses`, { method: "POST", body: JSON.stringify({ input: "hi", previous_response_id: next.id }) });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { param: string; message: string } }).error).toMatchObject({ param: "previous_response_id", message: expect.stringMatching(/previous response resp_\w+ not found/) });
    // store: false keeps nothing.
    const unstored = await client.responses.create({ model: "m", input: "Hi", store: false, max_output_tokens: 2 });
    expect((unstored as unknown as { store: boolean }).store).toBe(false);
    expect((await fetch(`${server.url}/v1/responses/${unstored.id}`)).status).toBe(404);
  });

  it("text.format json_schema constrains the output; bad requests are 400s naming the field", async () => {
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const shaped = await client.responses.create({ model: "m", input: "Is it ok?", text: { format: { type: "json_schema", name: "answer", schema, strict: true } }, temperature: 0.7, seed: 3, max_output_tokens: 40 } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(typeof JSON.parse(shaped.output_text).ok).toBe("boolean");
    const post = async (body: object) => fetch(`${server.url}/v1/responses`, { method: "POST", body: JSON.stringify(body) });
    const refusals: [object, string][] = [
      [{ input: [] }, "input"],
      [{ input: "hi", tools: [{ type: "web_search" }] }, "tools.0.type"],
      [{ input: "hi", max_output_tokens: 100_000 }, "max_output_tokens"],
    ];
    for (const [body, param] of refusals) {
      const response = await post(body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(((await response.json()) as { error: { param: string | null } }).error.param).toBe(param);
    }
  });
});

describe("memra serve: Anthropic's Messages API (POST /v1/messages)", () => {
  const post = async (path: string, body: object) => fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "anthropic-version": "2023-06-01" } });

  it("answers as model.chat answers the same messages, whole and streamed; counts tokens", async () => {
    const expected = await model.chat([{ role: "system", content: "Be brief." }, ...messages], { temperature: 0, maxTokens: 12 });
    const message = (await (await post("/v1/messages", { model: "m", system: "Be brief.", messages, max_tokens: 12, temperature: 0 })).json()) as {
      id: string;
      type: string;
      content: { type: string; text?: string; thinking?: string }[];
      stop_reason: string;
      usage: { input_tokens: number; output_tokens: number };
    };
    expect(message.type).toBe("message");
    expect(message.id).toMatch(/^msg_/);
    expect(message.content.filter((block) => block.type === "text").map((block) => block.text).join("")).toBe(expected.answer);
    expect(message.content.filter((block) => block.type === "thinking").map((block) => block.thinking).join("")).toBe(expected.reasoning);
    expect(message.stop_reason).toBe(expected.finishReason === "length" ? "max_tokens" : "end_turn");
    expect(message.usage).toMatchObject({ input_tokens: expected.usage.promptTokens, output_tokens: expected.usage.completionTokens });

    const streamed = await (await post("/v1/messages", { model: "m", system: "Be brief.", messages, max_tokens: 12, temperature: 0, stream: true })).text();
    const events = streamed.split("\n\n").filter((frame) => frame.includes("data: ")).map((frame) => {
      const [eventLine, dataLine] = frame.split("\n");
      const data = JSON.parse(dataLine!.slice(6)) as { type: string; delta?: { type: string; text?: string; stop_reason?: string } };
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
    expect(events[0]!.type).toBe("message_start");
    expect(events.at(-1)!.type).toBe("message_stop");
    expect(events.filter((event) => event.delta?.type === "text_delta").map((event) => event.delta!.text).join("")).toBe(expected.answer);
    expect(events.find((event) => event.type === "message_delta")!.delta!.stop_reason).toBe(message.stop_reason);

    const counted = (await (await post("/v1/messages/count_tokens", { model: "m", system: "Be brief.", messages })).json()) as { input_tokens: number };
    expect(counted.input_tokens).toBe(expected.usage.promptTokens);
  });

  it("a forced tool comes back as a tool_use block, and a tool_result goes back in as the chat's tool turn", async () => {
    const tools = [{ name: "add", input_schema: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 9 }, b: { type: "integer", minimum: 0, maximum: 9 } }, required: ["a", "b"] } }];
    const question = [{ role: "user" as const, content: "Add two digits" }];
    const forced = (await (await post("/v1/messages", { messages: question, tools, tool_choice: { type: "tool", name: "add" }, max_tokens: 120, temperature: 0 })).json()) as {
      content: { type: string; id?: string; name?: string; input?: Record<string, number> }[];
      stop_reason: string;
    };
    const expected = await model.chat(question, { tools: [{ type: "function", function: { name: "add", parameters: tools[0]!.input_schema } }], toolChoice: { name: "add" }, temperature: 0, maxTokens: 120, enableThinking: false });
    const use = forced.content.find((block) => block.type === "tool_use")!;
    expect(forced.stop_reason).toBe("tool_use");
    expect(use.id).toMatch(/^toolu_/);
    expect([use.name, JSON.stringify(use.input)]).toEqual([expected.toolCalls[0]!.name, expected.toolCalls[0]!.arguments]);
    const next = [...question, { role: "assistant" as const, content: [{ type: "tool_use", id: use.id, name: "add", input: use.input }] }, { role: "user" as const, content: [{ type: "tool_result", tool_use_id: use.id, content: "7" }] }];
    const counted = (await (await post("/v1/messages/count_tokens", { messages: next, tools })).json()) as { input_tokens: number };
    const conversation = [
      ...question,
      { role: "assistant" as const, content: "", tool_calls: [{ id: use.id!, type: "function" as const, function: { name: "add", arguments: JSON.stringify(use.input) } }] },
      { role: "tool" as const, tool_call_id: use.id!, content: "7" },
    ];
    const rendered = model.tokenizer.encode(model.tokenizer.applyChatTemplate(conversation, { addGenerationPrompt: true, enableThinking: true, tools: [{ type: "function", function: { name: "add", parameters: tools[0]!.input_schema } }] }), { special: true });
    expect(counted.input_tokens).toBe(rendered.length);
    const refused = await post("/v1/messages", { messages: question });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ type: "error", error: { message: "max_tokens: max_tokens is required" } });
  });
});

describe("memra serve: echo with logprobs (how evaluation harnesses score texts)", () => {
  const postTo = async (body: object) => fetch(`${server.url}/v1/completions`, { method: "POST", body: JSON.stringify(body) });
  const prompt = "The quick brown fox jumps over the lazy dog";

  it("echoes the prompt with its tokens' logprobs before the completion's, as model.promptLogprobs scores them", async () => {
    const tokens = model.tokenizer.encode(prompt, { special: true });
    const scored = await model.promptLogprobs(tokens, { topLogprobs: 2 });
    const generated = await model.complete(tokens, { temperature: 0, maxTokens: 1, logprobs: true });
    // lm-evaluation-harness's loglikelihood request.
    const response = (await (await postTo({ prompt, max_tokens: 1, temperature: 0, logprobs: 2, echo: true })).json()) as {
      choices: { text: string; logprobs: { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[]; text_offset: number[] } }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    const choice = response.choices[0]!;
    expect(choice.text).toBe(prompt + generated.text);
    expect(choice.logprobs.tokens).toEqual([...tokens, ...generated.tokens].map((token) => model.tokenizer.decode([token], { special: true })));
    expect(choice.logprobs.token_logprobs[0]).toBeNull();
    expect(choice.logprobs.top_logprobs[0]).toBeNull();
    expect(choice.logprobs.token_logprobs.slice(0, tokens.length)).toEqual(scored.logprobs);
    expect(Object.keys(choice.logprobs.top_logprobs[3]!)).toEqual(scored.topLogprobs[3]!.map((top) => model.tokenizer.decode([top.id])));
    // The completion's token: its logprob as scoring the whole text gives it.
    expect(choice.logprobs.token_logprobs.at(-1)).toBeCloseTo((await model.promptLogprobs([...tokens, ...generated.tokens])).logprobs.at(-1)!, 4);
    expect(choice.logprobs.text_offset.at(-1)).toBe(prompt.length);
    expect(response.usage).toMatchObject({ prompt_tokens: tokens.length, completion_tokens: 1 });

    // max_tokens 0: the prompt alone, scored; streamed too.
    const alone = (await (await postTo({ prompt: tokens, max_tokens: 0, logprobs: 0, echo: true })).json()) as typeof response;
    expect(alone.choices[0]!.text).toBe(prompt);
    expect(alone.choices[0]!.logprobs.token_logprobs).toEqual(scored.logprobs);
    expect(alone.usage.completion_tokens).toBe(0);
    const streamed = await (await postTo({ prompt, max_tokens: 3, temperature: 0, echo: true, stream: true })).text();
    const texts = streamed.split("\n\n").filter((line) => line.startsWith("data: {")).map((line) => (JSON.parse(line.slice(6)) as { choices: { text: string }[] }).choices[0]!.text);
    expect(texts[0]).toBe(prompt);
    expect(texts.join("")).toBe(prompt + (await model.complete(prompt, { temperature: 0, maxTokens: 3 })).text);
    // vLLM's prompt_logprobs: each position's prompt token (with its rank) and the most likely ones.
    const vllm = (await (await postTo({ prompt, max_tokens: 1, temperature: 0, prompt_logprobs: 2 })).json()) as { choices: { prompt_logprobs: (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[] }[] };
    const perPosition = vllm.choices[0]!.prompt_logprobs;
    expect(perPosition).toHaveLength(tokens.length);
    expect(perPosition[0]).toBeNull();
    for (let i = 1; i < tokens.length; i++) {
      const entry = perPosition[i]!;
      expect(entry[String(tokens[i])]).toEqual({ logprob: scored.logprobs[i], rank: scored.ranks[i], decoded_token: model.tokenizer.decode([tokens[i]!]) });
      scored.topLogprobs[i]!.forEach((top, k) => expect(entry[String(top.id)]!.rank).toBe(top.id === tokens[i] ? scored.ranks[i] : k + 1));
    }
    const chat = (await (await fetch(`${server.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ messages, max_tokens: 1, prompt_logprobs: 0 }) })).json()) as { prompt_logprobs: unknown[]; choices: unknown[] };
    const chatPrompt = model.tokenizer.encode(model.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: true }), { special: true });
    expect(chat.prompt_logprobs).toHaveLength(chatPrompt.length);
    expect(Object.keys(chat.prompt_logprobs[1] as object)).toEqual([String(chatPrompt[1])]);
    const refused = await postTo({ prompt, max_tokens: 0 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { param: string } }).error.param).toBe("max_tokens");
  });
});

describe("memra serve: llama.cpp server's own /completion and /props", () => {
  const prompt = "The quick brown fox";
  const post = async (body: object) => fetch(`${server.url}/completion`, { method: "POST", body: JSON.stringify(body) });

  it("/completion answers with model.complete's text, llama.cpp's fields, probabilities and timings", async () => {
    const expected = await model.complete(prompt, { temperature: 0, maxTokens: 12, logprobs: true, topLogprobs: 3 });
    const response = await post({ prompt, n_predict: 12, temperature: 0, n_probs: 3, return_tokens: true, cache_prompt: true });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown> & { timings: Record<string, number>; completion_probabilities: { id: number; token: string; logprob: number; top_logprobs: { id: number; logprob: number }[] }[] };
    expect(body.content).toBe(expected.text);
    expect(body.tokens).toEqual(expected.tokens);
    expect(body).toMatchObject({ stop: true, stop_type: "limit", stopping_word: "", tokens_predicted: 12, tokens_evaluated: expected.usage.promptTokens, model: "tiny-q8_0.gguf" });
    expect(body.timings.predicted_n).toBe(12);
    expect(body.timings.prompt_n).toBeGreaterThan(0);
    expect(body.timings.predicted_per_second).toBeGreaterThan(0);
    expect(body.timings.draft_n).toBeUndefined();
    expect(body.completion_probabilities).toHaveLength(12);
    const chunks: { token?: number; logprob?: number; topLogprobs?: readonly { id: number; logprob: number }[] }[] = [];
    for await (const chunk of model.generate(prompt, { temperature: 0, maxTokens: 12, logprobs: true, topLogprobs: 3 })) if (chunk.token !== undefined) chunks.push(chunk);
    body.completion_probabilities.forEach((step, i) => {
      expect(step.id).toBe(chunks[i]!.token);
      expect(step.logprob).toBeCloseTo(chunks[i]!.logprob!, 6);
      expect(step.top_logprobs.map((top) => top.id)).toEqual(chunks[i]!.topLogprobs!.map((top) => top.id));
      expect(step.token).toBe(model.tokenizer.decode([step.id]));
    });
    // A stop word, a seeded sample (seed -1: random), token prompts.
    const cut = expected.text.slice(4, 7);
    const stopped = (await (await post({ prompt, n_predict: 12, temperature: 0, stop: [cut] })).json()) as Record<string, unknown>;
    expect(stopped).toMatchObject({ stop_type: "word", stopping_word: cut, content: expected.text.slice(0, expected.text.indexOf(cut)) });
    const tokens = model.tokenizer.encode(prompt, { special: true });
    const sampled = await model.complete(tokens, { temperature: 0.9, seed: 5, maxTokens: 10 });
    const viaTokens = (await (await post({ prompt: tokens, n_predict: 10, temperature: 0.9, seed: 5 })).json()) as Record<string, unknown>;
    expect(viaTokens.content).toBe(sampled.text);
    expect(((await (await post({ prompt, n_predict: 4, seed: -1 })).json()) as { tokens_predicted: number }).tokens_predicted).toBe(4);
  });

  it("/completion streams llama.cpp's events: content pieces, then stop with the rest", async () => {
    const expected = await model.complete(prompt, { temperature: 0, maxTokens: 10 });
    const response = await post({ prompt, n_predict: 10, temperature: 0, stream: true });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const events = (await response.text())
      .split("\n\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as { content: string; stop: boolean; stop_type?: string; tokens_predicted?: number });
    expect(events.at(-1)).toMatchObject({ stop: true, stop_type: "limit", tokens_predicted: 10, content: "" });
    expect(events.slice(0, -1).every((event) => event.stop === false)).toBe(true);
    expect(events.map((event) => event.content).join("")).toBe(expected.text);
  });

  it("/completion with json_schema or grammar constrains the content; bad requests are 400s naming the field", async () => {
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
    const shaped = (await (await post({ prompt, n_predict: 40, temperature: 0.8, seed: 2, json_schema: schema })).json()) as { content: string; stop_type: string };
    expect(JSON.parse(shaped.content)).toHaveProperty("ok");
    const yes = (await (await post({ prompt, n_predict: 8, grammar: 'root ::= "yes" | "no"' })).json()) as { content: string };
    expect(["yes", "no"]).toContain(yes.content);
    const refusals: [object, string | null][] = [
      [{ prompt, grammar: 'root ::= "unterminated', n_predict: 2 }, "grammar"],
      [{ prompt, grammar: 'root ::= "a"', json_schema: schema }, "grammar"],
      [{ prompt: [1, 999999] }, "prompt"],
      [{ prompt, n_predict: -2 }, "n_predict"],
      [{ prompt, n_probs: 21 }, "n_probs"],
      [{ n_predict: 2 }, "prompt"],
    ];
    for (const [body, param] of refusals) {
      const response = await post(body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(((await response.json()) as { error: { param: string | null } }).error.param).toBe(param);
    }
    expect((await fetch(`${server.url}/completion`)).status).toBe(405);
  });

  it("/props describes the server as llama.cpp's does", async () => {
    const props = (await (await fetch(`${server.url}/props`)).json()) as { default_generation_settings: { n_ctx: number }; total_slots: number; model_path: string; chat_template: string };
    expect(props.default_generation_settings.n_ctx).toBe(512);
    expect(props.total_slots).toBe(4);
    expect(props.model_path).toBe("tiny-q8_0.gguf");
    expect(props.chat_template).toContain("im_start");
  });

  it("/props lists the sampler's defaults under llama.cpp's names, and /completion takes them back", async () => {
    const props = (await (await fetch(`${server.url}/props`)).json()) as { default_generation_settings: { params: Record<string, unknown> } };
    const params = props.default_generation_settings.params;
    // llama.cpp's common_params_sampling defaults (common/common.h)
    expect(params).toMatchObject({ temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, typical_p: 1, top_n_sigma: -1, repeat_last_n: 64, repeat_penalty: 1 });
    expect(params).toMatchObject({ mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, dry_multiplier: 0, dry_base: 1.75, xtc_probability: 0, xtc_threshold: 0.1 });
    const response = await fetch(`${server.url}/completion`, { method: "POST", body: JSON.stringify({ ...params, prompt: "hello", n_predict: 2, seed: 3 }) });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { tokens_predicted: number }).tokens_predicted).toBe(2);
  });
});

describe("memra serve: llama.cpp's /infill and the generation limits of llama.cpp and vLLM", () => {
  const postTo = async (path: string, body: object) => fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body) });
  const input = { prefix: "def add(a, b):\n    ", suffix: "\n\nprint(add(1, 2))\n", extra: [{ filename: "util.py", text: "import math\n" }] };

  it("/infill completes llama.cpp's FIM prompt as model.complete completes those tokens", async () => {
    // llama.cpp's server layout: a batch of 2,048, this server's context of 512, no n_predict.
    const promptTokens = infillPromptTokens(model.tokenizer, input, { batchTokens: 2048, contextTokens: 512, predictTokens: -1 });
    expect(promptTokens[0]).toBe(model.tokenizer.fillInMiddleTokens.prefix);
    const expected = await model.complete(promptTokens, { temperature: 0, maxTokens: 10 });
    const response = await postTo("/infill", { input_prefix: input.prefix, input_suffix: input.suffix, input_extra: input.extra, n_predict: 10, temperature: 0, return_tokens: true });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ content: expected.text, tokens: expected.tokens, tokens_evaluated: promptTokens.length, stop_type: "limit" });
    // prompt: the middle's first words, after the prefix.
    const withPrompt = infillPromptTokens(model.tokenizer, { ...input, prompt: "return" }, { batchTokens: 2048, contextTokens: 512, predictTokens: -1 });
    const prompted = await model.complete(withPrompt, { temperature: 0, maxTokens: 6 });
    const viaPrompt = (await (await postTo("/infill", { input_prefix: input.prefix, input_suffix: input.suffix, prompt: "return", n_predict: 6, temperature: 0 })).json()) as Record<string, unknown>;
    expect(viaPrompt.content).toBe(prompted.text);
    expect(viaPrompt.tokens_evaluated).toBe(withPrompt.length);
  });

  it("/v1/completions with suffix (OpenAI's insertion) completes the same FIM prompt", async () => {
    const promptTokens = infillPromptTokens(model.tokenizer, { prefix: input.prefix, suffix: input.suffix }, { batchTokens: 2048, contextTokens: 512, predictTokens: -1 });
    const expected = await model.complete(promptTokens, { temperature: 0, maxTokens: 8 });
    const inserted = (await (await postTo("/v1/completions", { prompt: input.prefix, suffix: input.suffix, max_tokens: 8, temperature: 0 })).json()) as { choices: { text: string }[]; usage: { prompt_tokens: number } };
    expect(inserted.choices[0]!.text).toBe(expected.text);
    expect(inserted.usage.prompt_tokens).toBe(promptTokens.length);
    const refused = await postTo("/v1/completions", { prompt: [1, 2, 3], suffix: "x" });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { param: string } }).error.param).toBe("suffix");
  });

  it("n_indent cuts at a line indented less; t_max_predict_ms ends after a newline once spent", async () => {
    const grammar = 'root ::= "x = 1\\n    y = 2\\n  z = 3\\n" [a-z]*';
    const indented = (await (await postTo("/infill", { input_prefix: "if a:\n    ", input_suffix: "", n_predict: 24, temperature: 0, grammar, n_indent: 4 })).json()) as Record<string, unknown>;
    expect(indented).toMatchObject({ content: "x = 1\n    y = 2\n  ", stop_type: "limit" });
    const timed = (await (await postTo("/completion", { prompt: "Code:", n_predict: 24, temperature: 0, grammar, t_max_predict_ms: 0.001, return_tokens: true })).json()) as { content: string; stop_type: string; tokens: number[] };
    expect(timed.stop_type).toBe("limit");
    expect(timed.content).toContain("\n");
    expect(model.tokenizer.decode(timed.tokens.slice(0, -1))).not.toContain("\n");
  });

  it("ignore_eos, min_tokens and stop_token_ids reach the generation as model.complete takes them", async () => {
    const prompt = "The quick brown fox";
    const eos = model.tokenizer.eosTokenId!;
    const plain = await model.complete(prompt, { temperature: 0, maxTokens: 12, ignoreEos: true });
    const stopToken = plain.tokens[4]!;
    const cases: [object, Parameters<Model["complete"]>[1]][] = [
      [{ logit_bias: { [eos]: 50 }, ignore_eos: true }, { logitBias: { [eos]: 50 }, ignoreEos: true }],
      [{ logit_bias: { [eos]: 50 }, min_tokens: 3 }, { logitBias: { [eos]: 50 }, minTokens: 3 }],
      [{ stop_token_ids: [stopToken], ignore_eos: true }, { stopTokens: [stopToken], ignoreEos: true }],
    ];
    for (const [fields, options] of cases) {
      const expected = await model.complete(prompt, { temperature: 0, maxTokens: 12, ...options });
      const response = (await (await postTo("/v1/completions", { prompt, max_tokens: 12, temperature: 0, ...fields })).json()) as { choices: { text: string; finish_reason: string }[]; usage: { completion_tokens: number } };
      expect(response.choices[0]!.text, JSON.stringify(fields)).toBe(expected.text);
      expect(response.usage.completion_tokens, JSON.stringify(fields)).toBe(expected.tokens.length);
      expect(response.choices[0]!.finish_reason).toBe(expected.finishReason === "length" ? "length" : "stop");
    }
    // The boosted EOS ends a plain request at once; ignore_eos and min_tokens keep it going.
    const boosted = (await (await postTo("/v1/chat/completions", { messages, max_tokens: 12, temperature: 0, logit_bias: { [eos]: 50 }, ignore_eos: true })).json()) as { usage: { completion_tokens: number } };
    expect(boosted.usage.completion_tokens).toBe(12);
    const refusals: [string, object, string][] = [
      ["/v1/completions", { prompt, max_tokens: 4, stop_token_ids: [10_000_000] }, "stop_token_ids"],
      ["/v1/completions", { prompt, max_tokens: 4, min_tokens: 5 }, "min_tokens"],
      ["/v1/chat/completions", { messages, min_tokens: -1 }, "min_tokens"],
      ["/completion", { prompt, n_indent: -1 }, "n_indent"],
      ["/infill", { input_suffix: "" }, "input_prefix"],
      ["/infill", { input_prefix: "a", input_suffix: "", input_extra: "x" }, "input_extra"],
      ["/infill", { input_prefix: "a", input_suffix: "", input_extra: [{ filename: "f" }] }, "input_extra.0.text"],
    ];
    for (const [path, body, param] of refusals) {
      const response = await postTo(path, body);
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(((await response.json()) as { error: { param: string | null } }).error.param).toBe(param);
    }
  });
});

describe("memra serve: LoRA scales per request and POST /lora-adapters (llama.cpp server's)", () => {
  let adapted: Model;
  let loraServer: OpenAIServer;
  let adapterPath: string;
  beforeAll(async () => {
    const options = resolveOptions("tiny", { weightType: "q8_0", tiedEmbeddings: false });
    adapterPath = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 3, strength: 0.5 });
    // As llama.cpp's --lora FILE --lora-init-without-apply: loaded at scale 0.
    adapted = loadModel(await syntheticModelFile(options), { maxSequences: 4, kvCacheTokens: 4 * 512, lora: [{ path: adapterPath, scale: 0 }] });
    loraServer = startOpenAIServer({ model: adapted, modelId: "tiny-lora", port: 0, contextLength: 512 });
  });
  afterAll(async () => {
    await loraServer.stop();
    adapted.dispose();
  });
  const postTo = async (path: string, body: unknown) => fetch(`${loraServer.url}${path}`, { method: "POST", body: JSON.stringify(body) });
  const prompt = "The quick brown fox";

  it("a request's lora scales its adapters for that request alone; POST /lora-adapters sets the default", async () => {
    expect(await (await fetch(`${loraServer.url}/lora-adapters`)).json()).toEqual([{ id: 0, path: adapterPath, scale: 0 }]);
    const base = await adapted.complete(prompt, { temperature: 0, maxTokens: 12 });
    const scaled = await adapted.complete(prompt, { temperature: 0, maxTokens: 12, lora: [{ id: 0, scale: 0.7 }] });
    expect(scaled.tokens).not.toEqual(base.tokens);
    const textOf = async (path: string, body: object) => {
      const answer = (await (await postTo(path, { prompt, temperature: 0, ...body })).json()) as { choices?: { text: string }[]; content?: string };
      return answer.choices ? answer.choices[0]!.text : answer.content;
    };
    // Both at once, each with its own scales.
    const [withLora, without] = await Promise.all([textOf("/v1/completions", { max_tokens: 12, lora: [{ id: 0, scale: 0.7 }] }), textOf("/v1/completions", { max_tokens: 12 })]);
    expect(withLora).toBe(scaled.text);
    expect(without).toBe(base.text);
    expect(await textOf("/completion", { n_predict: 12, lora: [{ id: 0, scale: 0.7 }] })).toBe(scaled.text);

    const set = await postTo("/lora-adapters", [{ id: 0, scale: 0.7 }]);
    expect(await set.json()).toEqual({ success: true });
    expect(await (await fetch(`${loraServer.url}/lora-adapters`)).json()).toEqual([{ id: 0, path: adapterPath, scale: 0.7 }]);
    expect(await textOf("/v1/completions", { max_tokens: 12 })).toBe(scaled.text);
    // A request's list leaves unlisted adapters at 0, whatever the default.
    expect(await textOf("/v1/completions", { max_tokens: 12, lora: [] })).toBe(base.text);
    await postTo("/lora-adapters", []);
    expect(adapted.loraAdapters[0]!.scale).toBe(0);

    const refusals: [string, unknown, string | null][] = [
      ["/v1/completions", { prompt, lora: [{ id: 1, scale: 1 }] }, "lora"],
      ["/v1/chat/completions", { messages, lora: [{ id: 0 }] }, "lora.0.scale"],
      ["/lora-adapters", [{ id: 3, scale: 1 }], "id"],
      ["/lora-adapters", { id: 0, scale: 1 }, null],
    ];
    for (const [path, body, param] of refusals) {
      const response = await postTo(path, body);
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(((await response.json()) as { error: { param: string | null } }).error.param).toBe(param);
    }
  });
});

describe("memra serve: LoRA modules served as models (vLLM's --lora-modules)", () => {
  it("a request naming a module runs with its adapter at scale 1; /v1/models lists it under the base model", async () => {
    const options = resolveOptions("tiny", { weightType: "q8_0", tiedEmbeddings: false });
    const adapter = await syntheticLoraFile(options, { rank: 4, alpha: 8, seed: 3, strength: 0.5 });
    const served = loadModel(await syntheticModelFile(options), { maxSequences: 2, kvCacheTokens: 2 * 512, lora: [{ path: adapter, scale: 0 }] });
    const moduleServer = startOpenAIServer({ model: served, modelId: "base.gguf", port: 0, contextLength: 512, loraModules: new Map([["sql-lora", 0]]) });
    try {
      const models = (await (await fetch(`${moduleServer.url}/v1/models`)).json()) as { data: { id: string; parent?: string; root?: string }[] };
      expect(models.data).toEqual([
        expect.objectContaining({ id: "base.gguf" }),
        expect.objectContaining({ id: "sql-lora", parent: "base.gguf", root: adapter }),
      ]);
      const prompt = "The quick brown fox";
      const textFor = async (body: object) => ((await (await fetch(`${moduleServer.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, max_tokens: 10, temperature: 0, ...body }) })).json()) as { choices: { text: string }[] }).choices[0]!.text;
      const withAdapter = await served.complete(prompt, { temperature: 0, maxTokens: 10, lora: [{ id: 0, scale: 1 }] });
      const base = await served.complete(prompt, { temperature: 0, maxTokens: 10 });
      expect(withAdapter.text).not.toBe(base.text);
      expect(await textFor({ model: "sql-lora" })).toBe(withAdapter.text);
      const named = (await (await fetch(`${moduleServer.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, max_tokens: 2, model: "sql-lora" }) })).json()) as { model: string };
      expect(named.model).toBe("sql-lora");
      expect(await textFor({ model: "base.gguf" })).toBe(base.text);
      expect(await textFor({ model: "sql-lora", lora: [] })).toBe(base.text);
    } finally {
      await moduleServer.stop();
      served.dispose();
    }
    expect(parseLoraModules(["a=/x.gguf", "b=/y=z.gguf"])).toEqual([{ name: "a", path: "/x.gguf" }, { name: "b", path: "/y=z.gguf" }]);
    expect(() => parseLoraModules(["/x.gguf"])).toThrow(/--lora-modules takes NAME=FILE/);
    expect(() => parseLoraModules(["a=/x", "a=/y"])).toThrow(/names "a" twice/);
  });
});

describe("memra serve: speculative decoding", () => {
  const prompt = "The quick brown fox jumps over the lazy dog. The quick brown fox";

  it("prediction (OpenAI's predicted outputs) drafts without changing the answer; usage counts the prediction tokens", async () => {
    const plain = await client.completions.create({ model: "x", prompt, temperature: 0, max_tokens: 32 });
    expect(plain.usage!.completion_tokens_details).toBeUndefined();
    const body = { model: "x", prompt, temperature: 0, max_tokens: 32, prediction: { type: "content", content: plain.choices[0]!.text } };
    const predicted = (await (await fetch(`${server.url}/v1/completions`, { method: "POST", body: JSON.stringify(body) })).json()) as OpenAI.Completion;
    expect(predicted.choices[0]!.text).toBe(plain.choices[0]!.text);
    const details = predicted.usage!.completion_tokens_details as { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
    expect(details.accepted_prediction_tokens).toBeGreaterThan(16);
    expect(details.rejected_prediction_tokens).toBeGreaterThanOrEqual(0);
    // The chat API, with content parts, streamed.
    const chat = await client.chat.completions.create({ model: "x", messages, temperature: 0, max_tokens: 16 });
    const answer = chat.choices[0]!.message.content!;
    const stream = await client.chat.completions.create({
      model: "x",
      messages,
      temperature: 0,
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
      prediction: { type: "content", content: [{ type: "text", text: answer }] },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(answer);
    expect(usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThan(0);
    const bad = await fetch(`${server.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, prediction: { type: "file", content: "x" } }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toMatch(/^prediction/);
  });

  it("with contextShift (memra serve --context-shift), /completion and /v1/completions generate past the context as the library does", async () => {
    const shifting = startOpenAIServer({ model, modelId: "tiny", port: 0, contextLength: 32, contextShift: true });
    try {
      const text = "Once upon a time, in a land far away, there lived";
      const promptTokens = model.tokenizer.encode(text);
      const expected = await model.generate(promptTokens, { temperature: 0, maxTokens: 40, ignoreEos: true, contextTokens: 32, contextShift: { keep: 3 } }).result;
      expect(expected.contextShift!.shifts).toBeGreaterThanOrEqual(2);
      const native = (await (await fetch(`${shifting.url}/completion`, { method: "POST", body: JSON.stringify({ prompt: text, n_predict: 40, temperature: 0, ignore_eos: true, n_keep: 3, return_tokens: true }) })).json()) as {
        tokens: number[];
        truncated: boolean;
        tokens_predicted: number;
      };
      expect(native.tokens).toEqual(expected.tokens);
      expect([native.truncated, native.tokens_predicted]).toEqual([true, 40]);
      // n_discard: that many tokens after n_keep per shift.
      const fixed = await model.generate(promptTokens, { temperature: 0, maxTokens: 40, ignoreEos: true, contextTokens: 32, contextShift: { keep: 3, discard: 8 } }).result;
      const discarding = (await (await fetch(`${shifting.url}/completion`, { method: "POST", body: JSON.stringify({ prompt: text, n_predict: 40, temperature: 0, ignore_eos: true, n_keep: 3, n_discard: 8, return_tokens: true }) })).json()) as { tokens: number[] };
      expect(discarding.tokens).toEqual(fixed.tokens);
      expect(fixed.contextShift!.discardedTokens).toBe(8 * fixed.contextShift!.shifts);
      const openai = (await (await fetch(`${shifting.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: text, max_tokens: 40, temperature: 0, ignore_eos: true }) })).json()) as OpenAI.Completion;
      const keepNone = await model.generate(promptTokens, { temperature: 0, maxTokens: 40, ignoreEos: true, contextTokens: 32, contextShift: true }).result;
      expect(openai.choices[0]!.text).toBe(keepNone.text);
      expect(openai.usage!.completion_tokens).toBe(40);
      // The server without it refuses what does not fit, as before.
      const refused = await fetch(`${server.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: text, max_tokens: 600, temperature: 0 }) });
      expect(refused.status).toBe(400);
    } finally {
      await shifting.stop();
    }
  });

  it("a server started with a drafter (memra serve --lookup) answers as one without; speculative.n_max 0 turns it off", async () => {
    const speculative = startOpenAIServer({ model, modelId: "tiny", port: 0, contextLength: 512, speculative: { method: "ngram", ngramMin: 2, ngramMax: 4, tokens: 8 } });
    try {
      const ask = async (url: string, extra: object = {}) =>
        (await (await fetch(`${url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, temperature: 0.7, seed: 4, max_tokens: 40, n: 2, ...extra }) })).json()) as OpenAI.Completion;
      const plain = await ask(server.url);
      const fast = await ask(speculative.url);
      expect(fast.choices.map((choice) => choice.text)).toEqual(plain.choices.map((choice) => choice.text));
      const details = fast.usage!.completion_tokens_details!;
      expect(details.accepted_prediction_tokens).toBeGreaterThan(10);
      const native = (await (await fetch(`${speculative.url}/completion`, { method: "POST", body: JSON.stringify({ prompt, temperature: 0.7, seed: 4, n_predict: 40 }) })).json()) as {
        content: string;
        timings: { draft_n: number; draft_n_accepted: number };
      };
      expect(native.content).toBe(plain.choices[0]!.text);
      expect(native.timings.draft_n_accepted).toBeGreaterThan(10);
      expect(native.timings.draft_n).toBeGreaterThanOrEqual(native.timings.draft_n_accepted);
      const off = await ask(speculative.url, { "speculative.n_max": 0 });
      expect(off.choices.map((choice) => choice.text)).toEqual(plain.choices.map((choice) => choice.text));
      expect(off.usage!.completion_tokens_details).toBeUndefined();
      const bad = await fetch(`${speculative.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, "speculative.n_max": 65 }) });
      expect(bad.status).toBe(400);
    } finally {
      await speculative.stop();
    }
  });
});

describe("memra serve: /v1/embeddings", () => {
  const texts = ["The quick brown fox", "What is the capital of France?", "a"];

  it("answers the openai client with model.embed's vectors (base64, as the client asks, and float)", async () => {
    const answer = await client.embeddings.create({ model: "tiny-q8_0.gguf", input: texts });
    expect(answer.object).toBe("list");
    expect(answer.data.map((item) => item.index)).toEqual([0, 1, 2]);
    texts.forEach((text, i) => expect(answer.data[i]!.embedding).toEqual(Array.from(model.embed(text))));
    expect(answer.usage).toEqual({ prompt_tokens: texts.reduce((sum, text) => sum + model.tokenizer.encode(text).length, 0), total_tokens: answer.usage.prompt_tokens });
    const floats = await client.embeddings.create({ model: "m", input: texts[0]!, encoding_format: "float", dimensions: 16 });
    expect(floats.data[0]!.embedding).toEqual(Array.from(model.embed(texts[0]!, { dimensions: 16 })));
    const tokens = model.tokenizer.encode(texts[1]!);
    const fromTokens = await client.embeddings.create({ model: "m", input: [tokens, tokens.slice(0, 3)] });
    expect(fromTokens.data[0]!.embedding).toEqual(answer.data[1]!.embedding);
    expect(fromTokens.data[1]!.embedding).toEqual(Array.from(model.embed(tokens.slice(0, 3))));
    // llama.cpp's server form
    const llama = await fetch(`${server.url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ content: texts[2] }) });
    expect(((await llama.json()) as { data: { embedding: number[] }[] }).data[0]!.embedding).toEqual(answer.data[2]!.embedding);
  });

  it("bad inputs are 400s naming the field", async () => {
    const post = async (body: unknown) => {
      const response = await fetch(`${server.url}/v1/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: response.status, error: ((await response.json()) as { error: { param: string | null; message: string } }).error };
    };
    expect(await post({ input: ["ok", ""] })).toMatchObject({ status: 400, error: { param: "input.1", message: expect.stringContaining("no tokens") } });
    expect(await post({ input: "x", dimensions: 65 })).toMatchObject({ status: 400, error: { param: "dimensions" } });
    expect(await post({ input: [[1, 99999999]] })).toMatchObject({ status: 400, error: { param: "input.0", message: expect.stringContaining("outside the vocabulary") } });
    expect(await post({ input: "one two ".repeat(300) })).toMatchObject({ status: 400, error: { message: expect.stringContaining("the context holds 512") } });
    expect(await post({})).toMatchObject({ status: 400, error: { param: "input" } });
  });
});

describe("memra serve: /v1/rerank", () => {
  const query = "What is the capital of France?";
  const documents = ["Paris is the capital and largest city of France.", "def add(a, b):\n    return a + b", "The quick brown fox jumps over the lazy dog.", "a"];
  let reranker: Model;
  let rerankServer: OpenAIServer;
  const post = async (url: string, path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as { results: { index: number; relevance_score: number; document?: { text: string } }[]; usage: { prompt_tokens: number }; error?: { message: string; param: string | null } } };
  };
  beforeAll(async () => {
    reranker = loadModel(await syntheticModelFile(resolveOptions("small", { weightType: "q4_K_M", reranker: true })));
    rerankServer = startOpenAIServer({ model: reranker, modelId: "reranker.gguf", port: 0, contextLength: 512 });
  });
  afterAll(async () => {
    await rerankServer.stop();
    reranker.dispose();
  });

  it("answers llama.cpp's, Jina's and vLLM's requests with model.rank's order and scores", async () => {
    const expected = reranker.rank(query, documents);
    const answer = await post(rerankServer.url, "/v1/rerank", { model: "reranker.gguf", query, documents });
    expect(answer.status).toBe(200);
    expect(answer.body.results).toEqual(expected.map(({ index, score }) => ({ index, relevance_score: score })));
    expect(answer.body.usage.prompt_tokens).toBe(expected.reduce((sum, r) => sum + r.tokens, 0));
    // llama.cpp's other paths, top_n, document objects and return_documents
    const top = await post(rerankServer.url, "/rerank", { query, documents: documents.map((text) => ({ text })), top_n: 2, return_documents: true });
    expect(top.body.results).toEqual(expected.slice(0, 2).map(({ index, score }) => ({ index, relevance_score: score, document: { text: documents[index]! } })));
    expect((await post(rerankServer.url, "/v1/reranking", { query, documents })).body.results).toEqual(answer.body.results);
    expect((await post(rerankServer.url, "/v1/rerank", { query, documents: [] })).body.results).toEqual([]);
  });

  it("bad requests are 400s naming the field; a chat model is not a reranker", async () => {
    expect(await post(rerankServer.url, "/v1/rerank", { documents })).toMatchObject({ status: 400, body: { error: { param: "query" } } });
    expect(await post(rerankServer.url, "/v1/rerank", { query, documents, top_n: 0 })).toMatchObject({ status: 400, body: { error: { param: "top_n" } } });
    expect(await post(rerankServer.url, "/v1/rerank", { query, documents: ["ok", "word ".repeat(600)] })).toMatchObject({
      status: 400,
      body: { error: { param: "documents.1", message: expect.stringContaining("the context holds 512") } },
    });
    expect(await post(server.url, "/v1/rerank", { query, documents })).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining("not a reranker") } } });
  });
});

describe("memra serve: /tokenize and /detokenize (llama.cpp's and vLLM's)", () => {
  const goldens = JSON.parse(readFileSync(new URL("../../../tokenizer/src/__fixtures__/llamacpp-tokenizer-goldens.json", import.meta.url), "utf8")) as {
    cases: { text: string; ids: number[]; idsSpecial?: number[] }[];
  };
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> & { error?: { message: string; param: string | null } } };
  };

  it("tokenizes as llama.cpp does (its recorded tokens of 40 texts), in both request forms", async () => {
    for (const c of goldens.cases.filter((_, i) => i % 10 === 0)) {
      const llama = await post("/tokenize", { content: c.text });
      expect(llama.status).toBe(200);
      expect(llama.body.tokens, c.text).toEqual(c.idsSpecial ?? c.ids);
      const vllm = await post("/tokenize", { model: "tiny-q8_0.gguf", prompt: c.text });
      expect(vllm.body).toMatchObject({ tokens: c.idsSpecial ?? c.ids, count: (c.idsSpecial ?? c.ids).length, max_model_len: 512 });
      // parse_special: false reads special tokens' text as text
      const plain = await post("/tokenize", { content: c.text, parse_special: false });
      expect(plain.body.tokens).toEqual(c.ids);
      const back = await post("/detokenize", { tokens: c.idsSpecial ?? c.ids });
      expect(back.body).toEqual({ content: c.text, prompt: c.text });
    }
  });

  it("with_pieces gives each token's piece (bytes where it is not whole UTF-8); return_token_strs, vLLM's strings", async () => {
    const text = "héllo 🙂 𠀀 <|im_end|>";
    const { body } = await post("/tokenize", { content: text, with_pieces: true });
    const pieces = body.tokens as { id: number; piece: string | number[] }[];
    expect(pieces.map((p) => p.id)).toEqual(model.tokenizer.encode(text, { special: true }));
    const bytes = pieces.flatMap((p) => (typeof p.piece === "string" ? Array.from(new TextEncoder().encode(p.piece)) : p.piece));
    expect(new TextDecoder().decode(Uint8Array.from(bytes))).toBe(text);
    expect(pieces.some((p) => Array.isArray(p.piece))).toBe(true); // U+20000 is three tokens of partial UTF-8 in Qwen3's vocabulary
    const strs = await post("/tokenize", { prompt: "hello world", return_token_strs: true });
    expect(strs.body.token_strs).toEqual(["hello", " world"]);
  });

  it("tokenizes chat messages to the prompt a chat completion is given", async () => {
    const chat = [{ role: "system", content: "Be brief." }, ...messages];
    const { body } = await post("/tokenize", { messages: chat });
    const completion = await client.chat.completions.create({ model: "tiny-q8_0.gguf", messages: chat as never, max_tokens: 1, temperature: 0 });
    expect(body.count).toBe(completion.usage!.prompt_tokens);
    const text = (await post("/detokenize", { tokens: body.tokens })).body.content as string;
    expect(text).toBe(model.tokenizer.applyChatTemplate(chat as never, { addGenerationPrompt: true, enableThinking: true }));
    const noPrompt = await post("/tokenize", { messages: chat, add_generation_prompt: false });
    expect(noPrompt.body.count).toBeLessThan(body.count as number);
  });

  it("bad requests are 400s naming the field", async () => {
    expect(await post("/tokenize", {})).toMatchObject({ status: 400, body: { error: { param: "content", message: expect.stringContaining("exactly one of content") } } });
    expect(await post("/tokenize", { content: "a", prompt: "b" })).toMatchObject({ status: 400 });
    expect(await post("/detokenize", { tokens: [1, 999999] })).toMatchObject({ status: 400, body: { error: { param: "tokens.1", message: expect.stringContaining("outside the vocabulary") } } });
    expect(await post("/detokenize", { tokens: [1.5] })).toMatchObject({ status: 400 });
    expect((await fetch(`${server.url}/tokenize`)).status).toBe(405);
  });
});

describe("memra serve: reasoning_content (llama.cpp's reasoning_format)", () => {
  // The demo model was trained on ChatML turns that open with Qwen3's empty think block, so with
  // thinking on it writes "<think>\n\n</think>\n\n" and then its answer.
  let demo: Model;
  let demoServer: OpenAIServer;
  let demoClient: OpenAI;
  beforeAll(() => {
    demo = loadModel(demoModelPath(), { maxSequences: 2, kvCacheTokens: 2 * 256 });
    demoServer = startOpenAIServer({ model: demo, modelId: "demo", port: 0, contextLength: 256 });
    demoClient = new OpenAI({ baseURL: `${demoServer.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await demoServer.stop();
    demo.dispose();
  });
  const question = [{ role: "user" as const, content: 'What does "hacker" mean?' }];

  it("moves the think block out of content, whole and streamed; reasoning_format none keeps it", async () => {
    const raw = await demoClient.chat.completions.create({ model: "demo", messages: question, temperature: 0, max_tokens: 24, reasoning_format: "none" } as never);
    const rawText = (raw as OpenAI.ChatCompletion).choices[0]!.message.content!;
    expect(rawText.startsWith("<think>\n\n</think>\n\n")).toBe(true);

    const whole = await demoClient.chat.completions.create({ model: "demo", messages: question, temperature: 0, max_tokens: 24 });
    const message = whole.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.content).toBe(rawText.slice("<think>\n\n</think>\n\n".length));
    expect(message.reasoning_content, "an empty think block gives no reasoning_content").toBeUndefined();

    const stream = await demoClient.chat.completions.create({ model: "demo", messages: question, temperature: 0, max_tokens: 24, stream: true });
    let content = "";
    let reasoning = "";
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      content += delta?.content ?? "";
      reasoning += delta?.reasoning_content ?? "";
    }
    expect(content).toBe(message.content);
    expect(reasoning).toBe("");
  }, 60_000);
});
