import { describe, expect, it } from "vitest";
import { ResponseBuilder, chatBodyOfResponses, responsesRequestSchema } from "./responses-api";

describe("the Responses API over chat completions", () => {
  it("turns input items into chat messages: instructions first, consecutive calls one assistant turn, reasoning items left out", () => {
    const body = responsesRequestSchema.parse({
      instructions: "Be brief.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "Weather in " }, { type: "input_text", text: "Oslo and Rome?" }] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: '{"city":"Rome"}' },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "rain" }] },
        { role: "assistant", content: [{ type: "output_text", text: "Oslo is sunny." }] },
      ],
      max_output_tokens: 64,
      reasoning: { effort: "minimal" },
      text: { format: { type: "json_object" } },
      tool_choice: { type: "function", name: "get_weather" },
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
    });
    const chat = chatBodyOfResponses(body);
    expect(chat.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Oslo and Rome?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
          { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
      { role: "tool", tool_call_id: "call_2", content: "rain" },
      { role: "assistant", content: "Oslo is sunny." },
    ]);
    expect(chat).toMatchObject({
      max_tokens: 64,
      chat_template_kwargs: { enable_thinking: false },
      response_format: { type: "json_object" },
      tool_choice: { type: "function", function: { name: "get_weather" } },
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
    });
    expect(chatBodyOfResponses(responsesRequestSchema.parse({ input: "hi" })).messages).toEqual([{ role: "user", content: "hi" }]);
    // A stored conversation's items come first, then the input's.
    const conversation = [{ role: "user" as const, content: "Name a colour" }, { type: "message" as const, role: "assistant" as const, content: "Blue" }];
    expect(chatBodyOfResponses(responsesRequestSchema.parse({ input: "Another?", instructions: "Be brief." }), conversation).messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Name a colour" },
      { role: "assistant", content: "Blue" },
      { role: "user", content: "Another?" },
    ]);
  });

  it("builds reasoning, message and function_call items in the order they come, with the API's events", () => {
    const events: Record<string, unknown>[] = [];
    const builder = new ResponseBuilder({ id: "resp_abc", object: "response" }, (event) => events.push(event));
    builder.start();
    builder.reasoning("Let me ");
    builder.reasoning("think.");
    builder.text("Calling ");
    builder.text("it.");
    builder.toolCall({ id: "call_9", name: "add", arguments: '{"a":1,"b":2}' });
    const response = builder.finish("stop", { input_tokens: 3, output_tokens: 4, total_tokens: 7 });
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, i) => i));
    expect(response).toMatchObject({
      status: "completed",
      incomplete_details: null,
      output: [
        { type: "reasoning", status: "completed", content: [{ type: "reasoning_text", text: "Let me think." }] },
        { type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Calling it." }] },
        { type: "function_call", call_id: "call_9", name: "add", arguments: '{"a":1,"b":2}' },
      ],
    });
    const ids = (response.output as { id: string }[]).map((item) => item.id);
    expect(new Set(ids).size).toBe(3);
    expect(events.find((event) => event.type === "response.output_text.done")).toMatchObject({ text: "Calling it.", item_id: ids[1], output_index: 1 });
    // Cut off by max_output_tokens: incomplete, as the API says it.
    const cut = new ResponseBuilder({ id: "resp_def" });
    cut.text("partial");
    expect(cut.finish("length", {})).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
  });
});
