import { type ChatMessage, parseToolCalls, splitReasoning } from "@memra/tokenizer";
import type { EngineSequence } from "../engine/inference-engine";
import type { Model } from "../load-model";
import { type ChatOptions, InvalidOptionError, chatOptionsSchema, loraScalesOf, parseOptions } from "./generation-options";
import { generateTokens } from "./generate-tokens";
import { type SavedState, saveSequenceState } from "./saved-state";
import type { GenerationChunk, GenerationResult } from "./generation-types";
import { toolCallId, toolTurn, withToolGrammar } from "./tool-choice";

/** A call of one of the chat's tools, taken out of the answer. */
export interface ChatToolCallResult {
  /** `call_...`, for the `tool` message that answers it (`tool_call_id`). */
  readonly id: string;
  readonly name: string;
  /** The arguments as JSON text. */
  readonly arguments: string;
}

export interface ChatResult extends GenerationResult {
  /** The model's `<think>` reasoning, without the tags. */
  readonly reasoning: string;
  /** The answer: the text outside the reasoning (and outside the tool calls when there are tools). */
  readonly answer: string;
  /** The calls the answer makes, when the options gave tools (empty otherwise). */
  readonly toolCalls: readonly ChatToolCallResult[];
}

export interface ChatStream extends AsyncIterable<GenerationChunk> {
  readonly result: Promise<ChatResult>;
}

export interface ChatSessionOptions {
  readonly system?: string;
  /** The history the session starts from (a system message among them, instead of `system`). */
  readonly messages?: readonly ChatMessage[];
  /** Context of the session's KV cache in tokens (default: the model's context length, at most 4096). */
  readonly contextLength?: number;
  /** The LoRA adapters' scales of every turn (a generation's `lora` option: listed adapters their scale, the others 0). */
  readonly lora?: readonly { readonly id: number; readonly scale: number }[];
  /**
   * What a turn does when the history, the new message and `maxTokens` do not fit the context:
   * "truncate-history" (default) leaves the oldest turns out of the prompt, whole turns from a
   * user message to the next, keeping the system message (as node-llama-cpp's chat sessions do);
   * `messages` keeps them all. "error": the turn throws a RangeError.
   */
  readonly contextOverflow?: "truncate-history" | "error";
}

/** The chat result of a generation: reasoning apart, and with `parseCalls` the tool calls too. */
function withReasoning(result: GenerationResult, parseCalls = false): ChatResult {
  const { reasoning, content } = splitReasoning(result.text);
  if (!parseCalls) return { ...result, reasoning, answer: content, toolCalls: [] };
  const split = parseToolCalls(content);
  return { ...result, reasoning, answer: split.content, toolCalls: split.toolCalls.map((call) => ({ id: toolCallId(), ...call })) };
}

/**
 * A multi-turn conversation that keeps its KV cache: each turn renders the whole history with the
 * chat template, and only the tokens after the longest prefix already in the cache are evaluated.
 */
export class ChatSession {
  readonly messages: ChatMessage[] = [];
  private readonly sequence: EngineSequence;
  private busy = false;
  private readonly overflow: "truncate-history" | "error";
  /** Messages of the history left out of the prompt (after the system message) to fit the context. */
  private dropped = 0;

  constructor(
    private readonly model: Model,
    options: ChatSessionOptions = {},
  ) {
    if (options.system !== undefined && options.messages !== undefined) throw new InvalidOptionError("system", "system: give the system message in `messages` when the session starts from a history");
    if (options.system !== undefined) this.messages.push({ role: "system", content: options.system });
    if (options.messages !== undefined) this.messages.push(...options.messages);
    const loraScales = loraScalesOf(model.loraAdapters.length, options.lora);
    this.sequence = model.engine.createSequence(options.contextLength ?? Math.min(model.contextLength, 4096), loraScales ? { loraScales } : {});
    this.overflow = options.contextOverflow ?? "truncate-history";
    if (this.overflow !== "truncate-history" && this.overflow !== "error") throw new InvalidOptionError("contextOverflow", `contextOverflow must be "truncate-history" or "error", got ${JSON.stringify(this.overflow)}`);
  }

  /** @internal Restoring a saved session: the messages its prompts had left out (see contextOverflow). */
  leaveOut(dropped: number): void {
    const system = this.messages[0]?.role === "system" ? 1 : 0;
    if (!Number.isInteger(dropped) || dropped < 0 || system + dropped > this.messages.length) throw new RangeError(`cannot leave ${dropped} of ${this.messages.length} messages out`);
    this.dropped = dropped;
  }

  /** The messages the next turn's prompt starts from: the history but the turns left out to fit the context. */
  get messagesInContext(): readonly ChatMessage[] {
    const system = this.messages[0]?.role === "system" ? 1 : 0;
    return [...this.messages.slice(0, system), ...this.messages.slice(system + this.dropped)];
  }

  /**
   * The prompt tokens of a turn: the history in context and `message`, the oldest turns left out
   * while the prompt and `maxTokens` exceed the context (contextOverflow "truncate-history").
   */
  private promptOf(message: ChatMessage, maxTokens: number, render: (messages: readonly ChatMessage[]) => number[]): number[] {
    const capacity = this.sequence.capacity;
    const system = this.messages[0]?.role === "system" ? 1 : 0;
    for (;;) {
      const kept = this.messages.slice(system + this.dropped);
      const tokens = render([...this.messages.slice(0, system), ...kept, message]);
      if (tokens.length + maxTokens <= capacity) return tokens;
      // The next user message after the first kept one starts the turns that stay.
      const next = kept.findIndex((candidate, i) => i > 0 && candidate.role === "user");
      if (this.overflow === "error" || kept.length === 0) {
        const what = kept.length === 0 ? "the message alone" : "the history and the message";
        throw new RangeError(`chat session: ${what} (${tokens.length} prompt tokens) + maxTokens (${maxTokens}) exceed the session's context of ${capacity} tokens`);
      }
      this.dropped += next < 0 ? kept.length : next;
    }
  }

  /** Sends a user message; streams the answer. The answer joins the history when the stream ends. */
  send(content: string, options: ChatOptions = {}): ChatStream {
    if (this.busy) throw new Error("the previous turn of this chat session is still running");
    const resolved = parseOptions(chatOptionsSchema, options);
    // The session's cache holds keys and values computed with its scales.
    if (resolved.lora !== undefined) throw new InvalidOptionError("lora", "lora: a chat session's LoRA scales are set when it is created (ChatSessionOptions.lora)");
    if (resolved.contextTokens !== undefined) throw new InvalidOptionError("contextTokens", "contextTokens: a chat session's context is set when it is created (ChatSessionOptions.contextLength)");
    if (resolved.contextShift !== false) throw new InvalidOptionError("contextShift", "contextShift: a chat session leaves its oldest turns out instead (ChatSessionOptions.contextOverflow)");
    const tools = toolTurn(resolved);
    const tokenizer = this.model.tokenizer;
    const promptTokens = this.promptOf({ role: "user", content }, resolved.maxTokens, (messages) =>
      tokenizer.encode(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: tools.enableThinking, ...(tools.tools ? { tools: tools.tools } : {}) }), { special: true }),
    );
    let shared = 0;
    const known = this.sequence.tokens; // what the sequence holds (or recomputes after a preemption)
    const limit = Math.min(known.length, promptTokens.length - 1);
    while (shared < limit && known[shared] === promptTokens[shared]) shared++;
    this.busy = true;
    const stream = generateTokens({
      model: this.model,
      promptTokens,
      sequence: this.sequence,
      cachedTokens: shared,
      options: withToolGrammar(resolved, tools),
      onFinish: (result) => {
        this.busy = false;
        this.messages.push({ role: "user", content }, { role: "assistant", content: result.text });
      },
    });
    let chatResult: Promise<ChatResult> | undefined;
    return {
      [Symbol.asyncIterator]: () => stream[Symbol.asyncIterator](),
      // Lazy, as the stream's: reading it before iterating runs the turn.
      get result() {
        chatResult ??= stream.result.then((result) => withReasoning(result, tools.parseCalls));
        return chatResult;
      },
    };
  }

  /**
   * Saves the session: its messages, and the keys and values of every token its cache holds (see
   * Model.saveState). Model.restoreChatSession gives the session back, in this process or another.
   */
  async saveState(path: string, options: { readonly signal?: AbortSignal } = {}): Promise<SavedState> {
    if (this.busy) throw new Error("the previous turn of this chat session is still running");
    this.busy = true;
    try {
      return await saveSequenceState(this.model, path, this.sequence, { messages: this.messages, ...(this.dropped > 0 ? { dropped: this.dropped } : {}) }, options.signal);
    } finally {
      this.busy = false;
    }
  }

  dispose(): void {
    this.sequence.release();
  }
}

export { withReasoning };
