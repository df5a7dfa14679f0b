/**
 * Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens), as llama.cpp's server
 * answers it for clients written against Anthropic's SDK, over the chat machinery: a request
 * becomes a chat completion request (system, messages with text, tool_use and tool_result blocks,
 * tools with input_schema), and the answer's reasoning, text and tool calls become `thinking`,
 * `text` and `tool_use` content blocks. Streamed as the API's events (message_start,
 * content_block_start / _delta / _stop, message_delta, message_stop).
 */
import { z } from "zod";
import type { ChatCompletionRequest, ChatMessageInput } from "./openai-schemas";

const textBlock = z.object({ type: z.literal("text"), text: z.string() }).passthrough();
const toolUseBlock = z.object({ type: z.literal("tool_use"), id: z.string(), name: z.string().min(1), input: z.unknown() }).passthrough();
const toolResultBlock = z
  .object({ type: z.literal("tool_result"), tool_use_id: z.string(), content: z.union([z.string(), z.array(textBlock)]).optional(), is_error: z.boolean().optional() })
  .passthrough();
/** Past thinking given back: not rendered (Qwen3's template drops past reasoning). */
const thinkingBlock = z.object({ type: z.enum(["thinking", "redacted_thinking"]) }).passthrough();
const block = z.discriminatedUnion("type", [textBlock, toolUseBlock, toolResultBlock, thinkingBlock], {
  error: "a content block must be text, tool_use, tool_result or thinking (images are not supported)",
});

export const messagesRequestSchema = z.object({
  model: z.string().optional(),
  max_tokens: z.number({ error: "max_tokens is required" }).int().positive(),
  messages: z.array(z.object({ role: z.enum(["user", "assistant"]), content: z.union([z.string(), z.array(block)]) })).min(1, "messages must hold at least one message"),
  system: z.union([z.string(), z.array(textBlock)]).optional(),
  stop_sequences: z.array(z.string().min(1)).max(4).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  stream: z.boolean().optional(),
  tools: z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()) }).passthrough()).optional(),
  tool_choice: z
    .object({ type: z.enum(["auto", "any", "tool", "none"]), name: z.string().optional(), disable_parallel_tool_use: z.boolean().optional() })
    .refine((choice) => choice.type !== "tool" || choice.name !== undefined, { message: 'tool_choice of type "tool" needs a name', path: ["name"] })
    .optional(),
  /** Qwen3's thinking: "enabled" on, "disabled" off; absent, the chat template's default (on). */
  thinking: z.object({ type: z.enum(["enabled", "disabled"]), budget_tokens: z.number().int().optional() }).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;

export const countTokensRequestSchema = messagesRequestSchema.omit({ max_tokens: true }).extend({ max_tokens: z.number().int().positive().optional() });

const blocksText = (content: string | readonly { readonly text: string }[] | undefined) => (content === undefined ? "" : typeof content === "string" ? content : content.map((part) => part.text).join(""));

/** The chat completion request a Messages request asks for. */
export function chatBodyOfMessages(body: Omit<MessagesRequest, "max_tokens"> & { readonly max_tokens?: number }): ChatCompletionRequest {
  const messages: ChatMessageInput[] = [];
  if (body.system !== undefined && blocksText(body.system) !== "") messages.push({ role: "system", content: blocksText(body.system) });
  for (const message of body.messages) {
    if (typeof message.content === "string") {
      messages.push({ role: message.role, content: message.content });
      continue;
    }
    let text = "";
    const calls: NonNullable<ChatMessageInput["tool_calls"]> = [];
    for (const part of message.content) {
      if (part.type === "text") text += (part as { text: string }).text;
      else if (part.type === "tool_use") {
        const use = part as z.infer<typeof toolUseBlock>;
        calls.push({ id: use.id, type: "function", function: { name: use.name, arguments: JSON.stringify(use.input ?? {}) } });
      } else if (part.type === "tool_result") {
        // the text before a result (rare) is its own turn first
        if (text !== "") messages.push({ role: message.role, content: text });
        text = "";
        const result = part as z.infer<typeof toolResultBlock>;
        messages.push({ role: "tool", tool_call_id: result.tool_use_id, content: blocksText(result.content) });
      }
    }
    if (message.role === "assistant" && calls.length > 0) messages.push({ role: "assistant", content: text, tool_calls: calls });
    else if (text !== "" || !message.content.some((part) => part.type === "tool_result")) messages.push({ role: message.role, content: text });
  }
  const choice = body.tool_choice;
  return {
    messages,
    ...(body.model === undefined ? {} : { model: body.model }),
    ...(body.max_tokens === undefined ? {} : { max_tokens: body.max_tokens }),
    ...(body.temperature === undefined ? {} : { temperature: body.temperature }),
    ...(body.top_p === undefined ? {} : { top_p: body.top_p }),
    ...(body.top_k === undefined ? {} : { top_k: body.top_k }),
    ...(body.stop_sequences && body.stop_sequences.length > 0 ? { stop: body.stop_sequences } : {}),
    ...(body.stream ? { stream: true } : {}),
    ...(body.tools && body.tools.length > 0 ? { tools: body.tools.map((tool) => ({ type: "function" as const, function: { name: tool.name, description: tool.description ?? null, parameters: tool.input_schema } })) } : {}),
    ...(choice
      ? {
          tool_choice: choice.type === "any" ? "required" : choice.type === "tool" ? { type: "function" as const, function: { name: choice.name! } } : choice.type,
          ...(choice.disable_parallel_tool_use ? { parallel_tool_calls: false } : {}),
        }
      : {}),
    ...(body.thinking ? { chat_template_kwargs: { enable_thinking: body.thinking.type === "enabled" } } : {}),
  } as ChatCompletionRequest;
}

type ContentBlock = { type: "thinking"; thinking: string; signature: string } | { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

/**
 * Builds an answer's content blocks as it streams in (thinking, text, tool uses, in the order they
 * come), emitting the API's events on the way when `emit` is given.
 */
export class MessageBuilder {
  readonly content: ContentBlock[] = [];
  private open: Extract<ContentBlock, { type: "thinking" | "text" }> | undefined;

  constructor(
    private readonly base: { readonly id: string; readonly model: string; readonly inputTokens: number },
    private readonly emit?: (event: Record<string, unknown>) => void,
  ) {}

  start(): void {
    this.emit?.({
      type: "message_start",
      message: { id: this.base.id, type: "message", role: "assistant", model: this.base.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: this.base.inputTokens, output_tokens: 0 } },
    });
  }

  private openBlock(block: Extract<ContentBlock, { type: "thinking" | "text" }>): void {
    this.close();
    this.open = block;
    this.content.push(block);
    this.emit?.({ type: "content_block_start", index: this.content.length - 1, content_block: block.type === "thinking" ? { type: "thinking", thinking: "", signature: "" } : { type: "text", text: "" } });
  }

  reasoning(piece: string): void {
    if (piece === "") return;
    if (this.open?.type !== "thinking") this.openBlock({ type: "thinking", thinking: "", signature: "" });
    (this.open as Extract<ContentBlock, { type: "thinking" }>).thinking += piece;
    this.emit?.({ type: "content_block_delta", index: this.content.length - 1, delta: { type: "thinking_delta", thinking: piece } });
  }

  text(piece: string): void {
    if (piece === "") return;
    if (this.open?.type !== "text") this.openBlock({ type: "text", text: "" });
    (this.open as Extract<ContentBlock, { type: "text" }>).text += piece;
    this.emit?.({ type: "content_block_delta", index: this.content.length - 1, delta: { type: "text_delta", text: piece } });
  }

  /** A tool call: its arguments (JSON text) become the block's input object. */
  toolCall(call: { readonly id: string; readonly name: string; readonly arguments: string }): void {
    this.close();
    let input: unknown;
    try {
      input = JSON.parse(call.arguments);
    } catch {
      input = { arguments: call.arguments };
    }
    const block: ContentBlock = { type: "tool_use", id: call.id.replace(/^call_/, "toolu_"), name: call.name, input };
    this.content.push(block);
    const index = this.content.length - 1;
    this.emit?.({ type: "content_block_start", index, content_block: { ...block, input: {} } });
    this.emit?.({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(input) } });
    this.emit?.({ type: "content_block_stop", index });
  }

  close(): void {
    if (!this.open) return;
    const index = this.content.indexOf(this.open);
    this.open = undefined;
    this.emit?.({ type: "content_block_stop", index });
  }

  /** Closes the blocks and gives the message (and its last events when streaming). */
  finish(finishReason: "stop" | "length" | "abort", stop: string | undefined, outputTokens: number, cachedTokens: number): Record<string, unknown> {
    this.close();
    const stopReason = finishReason === "length" ? "max_tokens" : this.content.some((block) => block.type === "tool_use") ? "tool_use" : stop !== undefined ? "stop_sequence" : "end_turn";
    const usage = { input_tokens: this.base.inputTokens, output_tokens: outputTokens, cache_read_input_tokens: cachedTokens };
    this.emit?.({ type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: stop ?? null }, usage: { output_tokens: outputTokens } });
    this.emit?.({ type: "message_stop" });
    return { id: this.base.id, type: "message", role: "assistant", model: this.base.model, content: this.content, stop_reason: stopReason, stop_sequence: stop ?? null, usage };
  }
}
