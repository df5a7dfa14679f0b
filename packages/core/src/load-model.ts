import { type GGUFFile, GGUFError, type ModelConfig, SUPPORTED_ARCHITECTURES, TOKENIZER_KEYS, openGGUF, readModelConfig } from "@memra/gguf";
import { type ChatMessage, Tokenizer } from "@memra/tokenizer";
import type { Backend } from "./backend";
import { UnsupportedArchitectureError } from "./errors";
import { ContiguousKVCache, type KVCache } from "./kv-cache";
import { type FeedForwardFactory, type ForwardOptions, Transformer, denseFeedForward, modelDimensions } from "./models/qwen3";
import { moeFeedForward } from "./models/qwen3-moe";
import { ReferenceBackend } from "./reference-backend";
import { type ChatResult, ChatSession, type ChatSessionOptions, type ChatStream, withReasoning } from "./generation/chat-session";
import { generateTokens } from "./generation/generate-tokens";
import { type ChatOptions, type GenerateOptions, chatOptionsSchema, generateOptionsSchema, parseOptions } from "./generation/generation-options";
import type { GenerationResult, GenerationStream } from "./generation/generation-types";

export interface LoadModelOptions {
  /** The backend to compute on; the reference (TypeScript) backend when absent. */
  readonly backend?: Backend;
  /** Most tokens one forward step processes (scratch buffers are sized for it). Default 512. */
  readonly maxBatchTokens?: number;
  /** Called as weights are loaded, with the tensor bytes read so far and in all (for a progress bar). */
  readonly onProgress?: (readBytes: number, totalBytes: number) => void;
}

export interface ModelMemory {
  /** Size of the GGUF file (memory-mapped, not copied). */
  readonly fileBytes: number;
  /** Bytes the backend holds for the weights (the reference backend keeps them as f32). */
  readonly weightBytes: number;
  /** Bytes of KV cache per token of context (all layers, K and V, f32). */
  readonly kvBytesPerToken: number;
}

/** A loaded model: config, memory figures, and a forward pass over a KV cache passed in. */
export class Model {
  private tokenizerInstance: Tokenizer | undefined;

  private constructor(
    readonly file: GGUFFile,
    readonly config: ModelConfig,
    readonly transformer: Transformer,
  ) {}

  static create(file: GGUFFile, options: LoadModelOptions = {}): Model {
    const architecture = file.architecture ?? "(none)";
    if (!(SUPPORTED_ARCHITECTURES as readonly string[]).includes(architecture)) {
      throw new UnsupportedArchitectureError(architecture, SUPPORTED_ARCHITECTURES);
    }
    const config = readModelConfig(file);
    const tokens = file.getArray(TOKENIZER_KEYS.tokens);
    const embedding = file.tensor("token_embd.weight");
    const vocabulary = embedding?.shape[1] ?? tokens?.items.length;
    if (vocabulary === undefined) throw new GGUFError(`kv["${TOKENIZER_KEYS.tokens}"]`, 0, "missing, and no token_embd.weight to size the vocabulary");
    const dimensions = modelDimensions(config, vocabulary);
    let feedForward: FeedForwardFactory;
    if (config.architecture === "qwen3moe") {
      feedForward = moeFeedForward(dimensions, config.expertCount, config.expertUsedCount, config.expertFeedForwardLength);
    } else {
      feedForward = denseFeedForward(dimensions, config.feedForwardLength);
    }
    const backend = options.backend ?? new ReferenceBackend();
    const transformer = new Transformer(backend, file, dimensions, feedForward, {
      maxBatchTokens: options.maxBatchTokens ?? 512,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    return new Model(file, config, transformer);
  }

  /** The tokenizer built from the file's `tokenizer.*` metadata (on first use). */
  get tokenizer(): Tokenizer {
    this.tokenizerInstance ??= Tokenizer.fromGGUFMetadata((key) => this.file.get(key));
    return this.tokenizerInstance;
  }

  get memory(): ModelMemory {
    const d = this.transformer.dimensions;
    return { fileBytes: this.file.bytes.byteLength, weightBytes: this.transformer.weightBytes, kvBytesPerToken: d.layers * 2 * d.kvWidth * 4 };
  }

  get vocabularySize(): number {
    return this.transformer.dimensions.vocabulary;
  }

  /** A contiguous KV cache for one sequence of up to `capacity` tokens (default: the model's context length). */
  createCache(capacity = this.config.contextLength): KVCache {
    const d = this.transformer.dimensions;
    return new ContiguousKVCache(this.transformer.backend, d.layers, d.kvWidth, capacity);
  }

  /** See Transformer.forward: runs tokens after what the cache holds, returns logits. */
  forward(tokens: Int32Array | readonly number[], cache: KVCache, options?: ForwardOptions): Float32Array {
    const ids = tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.transformer.forward(ids, cache, options);
  }

  /**
   * Generates a continuation, streamed: `for await (const chunk of model.generate(prompt))`.
   * A string prompt is completed as is (special tokens in it are parsed unless `special: false`);
   * messages are rendered with the chat template first. `await stream.result` afterwards gives the
   * whole text, finish reason, usage and timings.
   */
  generate(prompt: string | readonly number[] | readonly ChatMessage[], options: GenerateOptions | ChatOptions = {}): GenerationStream {
    const isMessages = Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] === "object";
    const resolved = isMessages ? parseOptions(chatOptionsSchema, options) : parseOptions(generateOptionsSchema, options);
    const enableThinking = (resolved as { enableThinking?: boolean }).enableThinking ?? true;
    const promptTokens = this.promptTokens(prompt, resolved.special, enableThinking);
    const cache = this.createCache(Math.min(this.config.contextLength, promptTokens.length + resolved.maxTokens));
    return generateTokens({ model: this, promptTokens, cache, cachedTokens: 0, options: resolved, onFinish: () => cache.dispose() });
  }

  /** `generate`, awaited: the whole result. */
  async complete(prompt: string | readonly number[], options: GenerateOptions = {}): Promise<GenerationResult> {
    const stream = this.generate(prompt, options);
    for await (const _chunk of stream) {
      // drain
    }
    return stream.result;
  }

  /** One chat turn over `messages` (chat template applied): reasoning and answer apart. */
  async chat(messages: readonly ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    if (messages.length === 0) throw new RangeError("chat needs at least one message");
    const stream = this.generate(messages, options);
    for await (const _chunk of stream) {
      // drain
    }
    return withReasoning(await stream.result);
  }

  /** A multi-turn conversation that reuses its KV cache for the shared prefix of every turn. */
  createChatSession(options: ChatSessionOptions = {}): ChatSession {
    return new ChatSession(this, options);
  }

  private promptTokens(prompt: string | readonly number[] | readonly ChatMessage[], special: boolean, enableThinking: boolean): number[] {
    if (typeof prompt === "string") return this.tokenizer.encode(prompt, { special });
    if (prompt.length === 0) throw new RangeError("the prompt is empty");
    if (typeof prompt[0] === "number") return [...(prompt as readonly number[])];
    const text = this.tokenizer.applyChatTemplate(prompt as readonly ChatMessage[], { addGenerationPrompt: true, enableThinking });
    return this.tokenizer.encode(text, { special: true });
  }

  dispose(): void {
    this.transformer.backend.dispose();
  }
}

/** Opens a GGUF file (memory-mapped) and builds its model on a backend. */
export function loadModel(path: string, options: LoadModelOptions = {}): Model {
  return Model.create(openGGUF(path), options);
}
