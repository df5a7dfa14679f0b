import { describe, expect, it } from "vitest";
import { MessageBuilder, chatBodyOfMessages, messagesRequestSchema } from "./anthropic-api";

describe("Anthropic's Messages API over chat completions", () => {
  it("turns system, text, tool_use and tool_result blocks into chat messages; tools and tool_choice into the chat's", () => {
    const body = messagesRequestSchema.parse({
      max_tokens: 64,
      system: [{ type: "text", text: "Be " }, { type: "text", text: "brief." }],
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: [{ type: "thinking", thinking: "hmm", signature: "" }, { type: "text", text: "Checking." }, { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "sunny" }] }, { type: "text", text: "And now?" }] },
      ],
      tools: [{ name: "get_weather", description: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      thinking: { type: "disabled" },
      stop_sequences: ["END"],
      top_k: 20,
    });
    const chat = chatBodyOfMessages(body);
    expect(chat.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: "Checking.", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
      { role: "tool", tool_call_id: "toolu_1", content: "sunny" },
      { role: "user", content: "And now?" },
    ]);
    expect(chat).toMatchObject({
      max_tokens: 64,
      stop: ["END"],
      top_k: 20,
      tool_choice: "required",
      parallel_tool_calls: false,
      chat_template_kwargs: { enable_thinking: false },
      tools: [{ type: "function", function: { name: "get_weather", description: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    });
    expect(chatBodyOfMessages(messagesRequestSchema.parse({ max_tokens: 1, messages: [{ role: "user", content: "x" }], tool_choice: { type: "tool", name: "f" } })).tool_choice).toEqual({ type: "function", function: { name: "f" } });
    expect(messagesRequestSchema.safeParse({ messages: [{ role: "user", content: "x" }] }).error?.issues[0]?.message).toBe("max_tokens is required");
    expect(messagesRequestSchema.safeParse({ max_tokens: 1, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }).success).toBe(false);
  });

  it("builds thinking, text and tool_use blocks with the API's events and stop reasons", () => {
    const events: Record<string, unknown>[] = [];
    const builder = new MessageBuilder({ id: "msg_1", model: "m", inputTokens: 5 }, (event) => events.push(event));
    builder.start();
    builder.reasoning("Let me think.");
    builder.text("Calling.");
    builder.toolCall({ id: "call_abc", name: "add", arguments: '{"a":1}' });
    const message = builder.finish("stop", undefined, 9, 2);
    expect(events.map((event) => event.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events.filter((event) => event.type === "content_block_delta").map((event) => (event.delta as { type: string }).type)).toEqual(["thinking_delta", "text_delta", "input_json_delta"]);
    expect(message).toMatchObject({
      type: "message",
      role: "assistant",
      stop_reason: "tool_use",
      content: [{ type: "thinking", thinking: "Let me think." }, { type: "text", text: "Calling." }, { type: "tool_use", id: "toolu_abc", name: "add", input: { a: 1 } }],
      usage: { input_tokens: 5, output_tokens: 9, cache_read_input_tokens: 2 },
    });
    expect(new MessageBuilder({ id: "m", model: "m", inputTokens: 1 }).finish("length", undefined, 1, 0).stop_reason).toBe("max_tokens");
    expect(new MessageBuilder({ id: "m", model: "m", inputTokens: 1 }).finish("stop", "END", 1, 0)).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "END" });
    expect(new MessageBuilder({ id: "m", model: "m", inputTokens: 1 }).finish("stop", undefined, 1, 0).stop_reason).toBe("end_turn");
  });
});
