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

  constructor(
    private readonly model: Model,
    options: ChatSessionOptions = {},
  ) {
    if (options.system !== undefined && options.messages !== undefined) throw new InvalidOptionError("system", "system: give the system message in `messages` when the session starts from a history");
    if (options.system !== undefined) this.messages.push({ role: "system", content: options.system });
    if (options.messages !== undefined) this.messages.push(...options.messages);
    const loraScales = loraScalesOf(model.loraAdapters.length, options.lora);
    this.sequence = model.engine.createSequence(options.contextLength ?? Math.min(model.contextLength, 4096), loraScales ? { loraScales } : {});
  }

  /** Sends a user message; streams the answer. The answer joins the history when the stream ends. */
  send(content: string, options: ChatOptions = {}): ChatStream {
    if (this.busy) throw new Error("the previous turn of this chat session is still running");
    const resolved = parseOptions(chatOptionsSchema, options);
    // The session's cache holds keys and values computed with its scales.
    if (resolved.lora !== undefined) throw new InvalidOptionError("lora", "lora: a chat session's LoRA scales are set when it is created (ChatSessionOptions.lora)");
    const messages: ChatMessage[] = [...this.messages, { role: "user", content }];
    const tools = toolTurn(resolved);
    const prompt = this.model.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: tools.enableThinking, ...(tools.tools ? { tools: tools.tools } : {}) });
    const promptTokens = this.model.tokenizer.encode(prompt, { special: true });
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
      return await saveSequenceState(this.model, path, this.sequence, { messages: this.messages }, options.signal);
    } finally {
      this.busy = false;
    }
  }

  dispose(): void {
    this.sequence.release();
  }
}

export { withReasoning };
