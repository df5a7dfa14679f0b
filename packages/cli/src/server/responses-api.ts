/**
 * OpenAI's Responses API (POST /v1/responses), the one agents and newer clients call, over the
 * chat machinery: a request becomes a chat completion request (its input items become messages,
 * its tools and text format the chat's tools and response_format), and the answer's reasoning,
 * text and tool calls become output items: `reasoning`, `message` (output_text) and
 * `function_call`. Streamed as the API's typed events. Responses are kept in memory (`store`,
 * true by default as OpenAI's) so that a request's `previous_response_id` continues one: its
 * conversation (the earlier inputs and outputs, not its instructions) comes before the new input.
 */
import { z } from "zod";
import type { ChatCompletionRequest, ChatMessageInput } from "./openai-schemas";

const text = z.object({ type: z.enum(["input_text", "output_text", "text"]), text: z.string() });

const messageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: z.union([z.string(), z.array(text)]),
  id: z.string().optional(),
  status: z.string().optional(),
});

const functionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().optional(),
  status: z.string().optional(),
});

const functionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: z.union([z.string(), z.array(text)]),
  id: z.string().optional(),
  status: z.string().optional(),
});

/** A reasoning item given back with the input: its text is not rendered (Qwen3's template drops past reasoning). */
const reasoningItem = z.object({ type: z.literal("reasoning") }).passthrough();

export const responsesRequestSchema = z.object({
  model: z.string().optional(),
  input: z.union([z.string(), z.array(z.union([functionCallItem, functionCallOutputItem, reasoningItem, messageItem])).min(1, "input must hold at least one item")]),
  instructions: z.string().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  tools: z
    .array(z.object({ type: z.literal("function", { error: 'only tools of type "function" are supported' }), name: z.string(), description: z.string().nullish(), parameters: z.record(z.string(), z.unknown()).nullish(), strict: z.boolean().nullish() }))
    .nullish(),
  tool_choice: z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), name: z.string() })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z
    .object({
      format: z
        .discriminatedUnion("type", [
          z.object({ type: z.literal("text") }),
          z.object({ type: z.literal("json_object") }),
          z.object({ type: z.literal("json_schema"), name: z.string().optional(), schema: z.record(z.string(), z.unknown()), strict: z.boolean().nullish(), description: z.string().optional() }),
        ])
        .optional(),
    })
    .nullish(),
  /** Qwen3's thinking is off for effort "none" or "minimal", on otherwise. */
  reasoning: z.object({ effort: z.enum(["none", "minimal", "low", "medium", "high"]).nullish(), summary: z.unknown().optional() }).nullish(),
  previous_response_id: z.string().nullish(),
  store: z.boolean().nullish(),
  seed: z.number().int().nullish(),
  user: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullish(),
});

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

const partsText = (content: string | readonly { readonly text: string }[]) => (typeof content === "string" ? content : content.map((part) => part.text).join(""));

/** An input item of a Responses request (a message, a function call, its output, a reasoning item). */
export type InputItem = Exclude<ResponsesRequest["input"], string>[number];

/** A request's input as items (a text input is one user message). */
export function inputItems(body: ResponsesRequest): InputItem[] {
  return typeof body.input === "string" ? [{ role: "user", content: body.input }] : [...body.input];
}

/**
 * The chat completion request a Responses request asks for (messages from the input items, in
 * order): `conversation`, the items before them (a stored response's: see ResponseStore), first.
 */
export function chatBodyOfResponses(body: ResponsesRequest, conversation: readonly InputItem[] = []): ChatCompletionRequest {
  const messages: ChatMessageInput[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  const items = [...conversation, ...inputItems(body)];
  for (const item of items) {
    if ("type" in item && item.type === "reasoning") continue;
    if ("type" in item && item.type === "function_call") {
      const call = { id: item.call_id, type: "function" as const, function: { name: item.name, arguments: item.arguments } };
      // consecutive calls belong to one assistant turn
      const last = messages.at(-1);
      if (last?.role === "assistant" && last.tool_calls && (last.content ?? "") === "") last.tool_calls.push(call);
      else if (last?.role === "assistant" && !last.tool_calls) last.tool_calls = [call];
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
      continue;
    }
    if ("type" in item && item.type === "function_call_output") {
      messages.push({ role: "tool", tool_call_id: item.call_id, content: partsText(item.output) });
      continue;
    }
    const message = item as z.infer<typeof messageItem>;
    messages.push({ role: message.role, content: partsText(message.content) });
  }
  const format = body.text?.format;
  const effort = body.reasoning?.effort;
  return {
    messages,
    ...(body.model === undefined ? {} : { model: body.model }),
    ...(body.max_output_tokens ? { max_tokens: body.max_output_tokens } : {}),
    ...(body.stream ? { stream: true } : {}),
    ...(body.temperature === undefined || body.temperature === null ? {} : { temperature: body.temperature }),
    ...(body.top_p === undefined || body.top_p === null ? {} : { top_p: body.top_p }),
    ...(body.seed === undefined || body.seed === null ? {} : { seed: body.seed }),
    ...(body.tools && body.tools.length > 0
      ? { tools: body.tools.map((tool) => ({ type: "function" as const, function: { name: tool.name, description: tool.description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? null } })) }
      : {}),
    ...(body.tool_choice ? { tool_choice: typeof body.tool_choice === "string" ? body.tool_choice : { type: "function" as const, function: { name: body.tool_choice.name } } } : {}),
    ...(body.parallel_tool_calls === undefined || body.parallel_tool_calls === null ? {} : { parallel_tool_calls: body.parallel_tool_calls }),
    ...(format && format.type !== "text"
      ? { response_format: format.type === "json_object" ? { type: "json_object" } : { type: "json_schema", json_schema: { name: format.name ?? "response", schema: format.schema, strict: format.strict ?? true } } }
      : {}),
    ...(effort === "none" || effort === "minimal" ? { chat_template_kwargs: { enable_thinking: false } } : {}),
  } as ChatCompletionRequest;
}

type OutputItem =
  | { type: "reasoning"; id: string; summary: []; content: { type: "reasoning_text"; text: string }[]; status: "completed" | "in_progress" }
  | { type: "message"; id: string; status: "completed" | "in_progress"; role: "assistant"; content: { type: "output_text"; text: string; annotations: []; logprobs: [] }[] }
  | { type: "function_call"; id: string; call_id: string; name: string; arguments: string; status: "completed" };

/**
 * Builds a response's output items from the answer as it streams in (reasoning, text, tool calls,
 * in the order they come), emitting the API's events on the way when `emit` is given.
 */
export class ResponseBuilder {
  readonly output: OutputItem[] = [];
  private open: Extract<OutputItem, { type: "reasoning" | "message" }> | undefined;
  private sequence = 0;
  private counter = 0;

  constructor(
    private readonly base: Record<string, unknown>,
    private readonly emit?: (event: Record<string, unknown>) => void,
  ) {}

  private send(type: string, fields: Record<string, unknown>): void {
    this.emit?.({ type, sequence_number: this.sequence++, ...fields });
  }

  private id(prefix: string): string {
    return `${prefix}_${(this.base.id as string).slice(5)}${(this.counter++).toString(36)}`;
  }

  /** The response object with the items so far. */
  response(status: "in_progress" | "completed" | "incomplete", extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { ...this.base, status, output: this.output, ...extra };
  }

  start(): void {
    this.send("response.created", { response: this.response("in_progress") });
    this.send("response.in_progress", { response: this.response("in_progress") });
  }

  reasoning(piece: string): void {
    if (piece === "") return;
    if (this.open?.type !== "reasoning") {
      this.close();
      const item: OutputItem = { type: "reasoning", id: this.id("rs"), summary: [], content: [{ type: "reasoning_text", text: "" }], status: "in_progress" };
      this.open = item;
      this.output.push(item);
      this.send("response.output_item.added", { output_index: this.output.length - 1, item: { ...item, content: [] } });
      this.send("response.content_part.added", { item_id: item.id, output_index: this.output.length - 1, content_index: 0, part: { type: "reasoning_text", text: "" } });
    }
    const item = this.open as Extract<OutputItem, { type: "reasoning" }>;
    item.content[0]!.text += piece;
    this.send("response.reasoning_text.delta", { item_id: item.id, output_index: this.output.length - 1, content_index: 0, delta: piece });
  }

  text(piece: string): void {
    if (piece === "") return;
    if (this.open?.type !== "message") {
      this.close();
      const item: OutputItem = { type: "message", id: this.id("msg"), status: "in_progress", role: "assistant", content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }] };
      this.open = item;
      this.output.push(item);
      this.send("response.output_item.added", { output_index: this.output.length - 1, item: { ...item, content: [] } });
      this.send("response.content_part.added", { item_id: item.id, output_index: this.output.length - 1, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } });
    }
    const item = this.open as Extract<OutputItem, { type: "message" }>;
    item.content[0]!.text += piece;
    this.send("response.output_text.delta", { item_id: item.id, output_index: this.output.length - 1, content_index: 0, delta: piece, logprobs: [] });
  }

  toolCall(call: { readonly id: string; readonly name: string; readonly arguments: string }): void {
    this.close();
    const item: OutputItem = { type: "function_call", id: this.id("fc"), call_id: call.id, name: call.name, arguments: call.arguments, status: "completed" };
    this.output.push(item);
    const index = this.output.length - 1;
    this.send("response.output_item.added", { output_index: index, item: { ...item, arguments: "", status: "in_progress" } });
    this.send("response.function_call_arguments.delta", { item_id: item.id, output_index: index, delta: call.arguments });
    this.send("response.function_call_arguments.done", { item_id: item.id, output_index: index, name: call.name, arguments: call.arguments });
    this.send("response.output_item.done", { output_index: index, item });
  }

  /** Ends the open reasoning or message item. */
  close(): void {
    const item = this.open;
    if (!item) return;
    this.open = undefined;
    item.status = "completed";
    const index = this.output.indexOf(item);
    if (item.type === "reasoning") {
      this.send("response.reasoning_text.done", { item_id: item.id, output_index: index, content_index: 0, text: item.content[0]!.text });
      this.send("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: item.content[0] });
    } else {
      this.send("response.output_text.done", { item_id: item.id, output_index: index, content_index: 0, text: item.content[0]!.text, logprobs: [] });
      this.send("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: item.content[0] });
    }
    this.send("response.output_item.done", { output_index: index, item });
  }

  /** Closes the items and gives the final response (and its last event when streaming). */
  finish(finishReason: "stop" | "length" | "abort", usage: Record<string, unknown>): Record<string, unknown> {
    this.close();
    const incomplete = finishReason === "length";
    const response = this.response(incomplete ? "incomplete" : "completed", { usage, incomplete_details: incomplete ? { reason: "max_output_tokens" } : null });
    this.send(incomplete ? "response.incomplete" : "response.completed", { response });
    return response;
  }
}

/** A response's output items as input items of a later request (what a client sends back). */
export function outputAsInput(output: readonly OutputItem[]): InputItem[] {
  return output.map((item): InputItem => {
    if (item.type === "message") return { type: "message", role: "assistant", content: item.content.map((part) => part.text).join("") };
    if (item.type === "function_call") return { type: "function_call", call_id: item.call_id, name: item.name, arguments: item.arguments };
    return { type: "reasoning" };
  });
}

export interface StoredResponse {
  readonly response: Record<string, unknown>;
  readonly conversation: readonly InputItem[];
  readonly input: readonly InputItem[];
}

export const inputItemsQuerySchema = z.object({
  order: z.enum(["asc", "desc"], { error: 'order must be "asc" or "desc"' }).default("desc"),
  limit: z.coerce.number({ error: "limit must be a number from 1 to 100" }).int("limit must be a number from 1 to 100").min(1, "limit must be a number from 1 to 100").max(100, "limit must be a number from 1 to 100").default(20),
  after: z.string().optional(),
});

/**
 * GET /v1/responses/ID/input_items: the input items of a stored response (its request's own, not
 * the conversation before it), as OpenAI lists them: each with an id (the one it was given, else
 * one made from the response's id and its place), messages with their content as parts
 * (input_text, output_text for the assistant's), newest first unless `order` is "asc"; `limit`
 * items after the item `after`.
 */
export function listInputItems(responseId: string, items: readonly InputItem[], query: z.output<typeof inputItemsQuerySchema>): Record<string, unknown> {
  const suffix = responseId.replace(/^resp_/, "");
  const listed = items.map((item, i): Record<string, unknown> => {
    if (item.type === "function_call" || item.type === "function_call_output" || item.type === "reasoning") {
      return { ...item, id: item.id ?? `${item.type === "reasoning" ? "rs" : item.type === "function_call" ? "fc" : "fco"}_${suffix}_${i}` };
    }
    const part = item.role === "assistant" ? "output_text" : "input_text";
    const content = typeof item.content === "string" ? [{ type: part, text: item.content }] : item.content.map((piece) => ({ type: piece.type === "text" ? part : piece.type, text: piece.text }));
    return { id: item.id ?? `msg_${suffix}_${i}`, type: "message", role: item.role, status: item.status ?? "completed", content };
  });
  if (query.order === "desc") listed.reverse();
  let start = 0;
  if (query.after !== undefined) {
    start = listed.findIndex((item) => item.id === query.after) + 1;
    if (start === 0) return { object: "list", data: [], first_id: null, last_id: null, has_more: false };
  }
  const data = listed.slice(start, start + query.limit);
  return { object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: start + query.limit < listed.length };
}

/**
 * Responses kept for `previous_response_id` and GET /v1/responses/ID: each with its conversation
 * (every input and output item up to it), in memory, the oldest forgotten beyond `capacity`.
 */
export class ResponseStore {
  private readonly entries = new Map<string, StoredResponse>();

  constructor(readonly capacity = 1000) {}

  /** `input`: the request's own input items (GET /v1/responses/ID/input_items); `conversation`: every item up to the response's output. */
  put(id: string, response: Record<string, unknown>, conversation: readonly InputItem[], input: readonly InputItem[] = []): void {
    this.entries.delete(id);
    this.entries.set(id, { response, conversation, input });
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  get(id: string): StoredResponse | undefined {
    return this.entries.get(id);
  }

  delete(id: string): boolean {
    return this.entries.delete(id);
  }
}
