import { type ChatMessage, splitReasoning } from "@memra/tokenizer";
import type { EngineSequence } from "../engine/inference-engine";
import type { Model } from "../load-model";
import { type ChatOptions, chatOptionsSchema, parseOptions } from "./generation-options";
import { generateTokens } from "./generate-tokens";
import type { GenerationChunk, GenerationResult } from "./generation-types";

export interface ChatResult extends GenerationResult {
  /** The model's `<think>` reasoning, without the tags. */
  readonly reasoning: string;
  /** The answer: the text outside the reasoning. */
  readonly answer: string;
}

export interface ChatStream extends AsyncIterable<GenerationChunk> {
  readonly result: Promise<ChatResult>;
}

export interface ChatSessionOptions {
  readonly system?: string;
  /** Context of the session's KV cache in tokens (default: the model's context length, at most 4096). */
  readonly contextLength?: number;
}

function withReasoning(result: GenerationResult): ChatResult {
  const { reasoning, content } = splitReasoning(result.text);
  return { ...result, reasoning, answer: content };
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
    if (options.system !== undefined) this.messages.push({ role: "system", content: options.system });
    this.sequence = model.engine.createSequence(options.contextLength ?? Math.min(model.config.contextLength, 4096));
  }

  /** Sends a user message; streams the answer. The answer joins the history when the stream ends. */
  send(content: string, options: ChatOptions = {}): ChatStream {
    if (this.busy) throw new Error("the previous turn of this chat session is still running");
    const resolved = parseOptions(chatOptionsSchema, options);
    const messages: ChatMessage[] = [...this.messages, { role: "user", content }];
    const prompt = this.model.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: resolved.enableThinking });
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
      options: resolved,
      onFinish: (result) => {
        this.busy = false;
        this.messages.push({ role: "user", content }, { role: "assistant", content: result.text });
      },
    });
    return { [Symbol.asyncIterator]: () => stream[Symbol.asyncIterator](), result: stream.result.then(withReasoning) };
  }

  dispose(): void {
    this.sequence.release();
  }
}

export { withReasoning };
