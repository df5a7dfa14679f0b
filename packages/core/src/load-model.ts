/** Rows of logits a prompt-scoring step asks for (`promptLogprobs`): [32, vocabulary] at a time. */
const PROMPT_LOGPROB_ROWS = 32;

/** `model.promptLogprobs`: each prompt token's log-probability after the tokens before it. */
export interface PromptLogprobs {
  readonly tokens: readonly number[];
  /** log p(tokens[i] | tokens[0..i)); null for the first token. */
  readonly logprobs: readonly (number | null)[];
  /** The most likely tokens at each position (topLogprobs of them, most likely first); null for the first token. */
  readonly topLogprobs: readonly (readonly TokenLogprob[] | null)[];
  /** Each token's rank among its position's logits (1: the most likely; vLLM's rank: 1 + the tokens with a larger logit); null for the first. */
  readonly ranks: readonly (number | null)[];
}

import { type GGUFFile, GGUFError, type ModelConfig, SUPPORTED_ARCHITECTURES, TOKENIZER_KEYS, type MetadataOverride, applyMetadataOverrides, openGGUFModel, readModelConfig } from "@memra/gguf";
import { type ChatMessage, type ChatToolDefinition, Tokenizer } from "@memra/tokenizer";
import { type TokenLogprob, logSumExp, topLogprobs } from "./evaluation";
import type { Backend } from "./backend";
import { ModelTensorError, UnsupportedArchitectureError } from "./errors";
import { type KVType, kvRowBytes } from "./backend";
import type { KVCache } from "./kv-cache";
import { DEFAULT_BLOCK_TOKENS, KVBlockPool, PagedKVCache } from "./paged-kv-cache";
import { InferenceEngine } from "./engine/inference-engine";
import { KVStateError, modelFingerprint } from "./kv-state";
import { type LoadedState, type SavedState, loadState, saveSequenceState } from "./generation/saved-state";
import { type FeedForwardFactory, type ForwardOptions, Transformer, denseFeedForward, modelDimensions } from "./models/qwen3";
import type { LoraAdapterOptions } from "./models/lora";
import { type RopeScalingOptions, ropeScalingOptionsSchema, scaledContextLength } from "./models/rope-scaling";
import { moeFeedForward } from "./models/qwen3-moe";
import { ReferenceBackend } from "./reference-backend";
import type { BackendPlacement } from "./placement/backend-placement";
import { type ChatResult, ChatSession, type ChatSessionOptions, type ChatStream, withReasoning } from "./generation/chat-session";
import { generateTokens } from "./generation/generate-tokens";
import { DEFAULT_INFILL_BATCH_TOKENS, type InfillInput, infillInputSchema, infillPromptTokens } from "./generation/infill";
import { type ChatOptions, type GenerateOptions, InvalidOptionError, type ResolvedChatOptions, chatOptionsSchema, generateOptionsSchema, loraScalesOf, parseOptions } from "./generation/generation-options";
import { type ToolTurn, toolTurn, withToolGrammar } from "./generation/tool-choice";
import type { GenerationResult, GenerationStream, StructuredGenerationResult } from "./generation/generation-types";
import { type EmbedOptions, type Pooling, checkDimensions, embedOptionsSchema, poolEmbedding, poolingOfGGUF } from "./generation/embeddings";
import { CLASSIFIER_TENSOR, ClassifierHead, type RankOptions, type RankedDocument, checkRerankTemplate, rankOptionsSchema, rankedDocuments, rerankPrompt, rerankTemplateOf, sharedPrefixLength } from "./generation/rerank";
import { z } from "zod";

export interface LoadModelOptions {
  /** The backend to compute on; the reference (TypeScript) backend when absent. */
  readonly backend?: Backend;
  /**
   * A backend per layer (and per layer's experts) instead of one backend: see planPlacement and
   * bindPlacement. Takes precedence over `backend`. The model disposes every backend it uses.
   */
  readonly placement?: BackendPlacement;
  /** Most tokens one forward step processes (scratch buffers are sized for it). Default 512. */
  readonly maxBatchTokens?: number;
  /** Called as weights are loaded, with the tensor bytes read so far and in all (for a progress bar). */
  readonly onProgress?: (readBytes: number, totalBytes: number) => void;
  /** Element type of KV caches: f16 (default), f32 or q8_0. */
  readonly kvType?: KVType;
  /** Tokens per KV block. Default 16. */
  readonly kvBlockTokens?: number;
  /**
   * RoPE scaling instead of the GGUF's (its `{arch}.rope.scaling.*` keys): llama.cpp's
   * `--rope-scaling`, `--rope-scale` and `--yarn-orig-ctx`, e.g. `{ type: "yarn", factor: 4,
   * originalContextLength: 32768 }` for Qwen3 at 128K tokens.
   */
  readonly ropeScaling?: RopeScalingOptions;
  /**
   * LoRA adapters in llama.cpp's GGUF form, applied at run time as llama.cpp applies them
   * (`--lora FILE`, `--lora-scaled FILE SCALE`): W x + scale · alpha / rank · B (A x) for each
   * adapted projection. A wrong adapter (another architecture or shape, an unsupported tensor) is a
   * LoraAdapterError naming the file and the tensor.
   */
  readonly lora?: readonly LoraAdapterOptions[];
  /** Tokens the shared KV pool of concurrent generation holds, all sequences together. Default: the context length, at most 8192. */
  readonly kvCacheTokens?: number;
  /** Most sequences one batched step runs. Default 16. */
  readonly maxSequences?: number;
  /**
   * Record decode steps as backend graphs and replay them, where the backend records graphs
   * (CUDA graphs on CudaBackend) and the model is dense and on one backend. Default true.
   */
  readonly decodeGraphs?: boolean;
  /** Metadata values instead of the file's (llama.cpp's --override-kv KEY=TYPE:VALUE), applied before anything is read from it. */
  readonly metadataOverrides?: readonly MetadataOverride[];
}

export interface ModelMemory {
  /** Size of the GGUF file (memory-mapped, not copied). */
  readonly fileBytes: number;
  /** Bytes the backend holds for the weights (the reference backend keeps them as f32). */
  readonly weightBytes: number;
  /** Bytes of KV cache per token of context (all layers, K and V, in the cache's element type). */
  readonly kvBytesPerToken: number;
  /** The KV element type. */
  readonly kvType: KVType;
}

/** A loaded model: config, memory figures, and a forward pass over a KV cache passed in. */
export class Model {
  private tokenizerInstance: Tokenizer | undefined;
  private engineInstance: InferenceEngine | undefined;
  private classifierInstance: ClassifierHead | null | undefined;
  private fingerprintValue: string | undefined;

  private constructor(
    readonly file: GGUFFile,
    readonly config: ModelConfig,
    readonly transformer: Transformer,
    private readonly loadOptions: LoadModelOptions = {},
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
    const dimensions = modelDimensions(config, vocabulary, options.ropeScaling === undefined ? undefined : parseOptions(ropeScalingOptionsSchema, options.ropeScaling));
    let feedForward: FeedForwardFactory;
    if (config.architecture === "qwen3moe") {
      feedForward = moeFeedForward(dimensions, config.expertCount, config.expertUsedCount, config.expertFeedForwardLength);
    } else {
      feedForward = denseFeedForward(dimensions, config.feedForwardLength);
    }
    const backend = options.placement ?? options.backend ?? new ReferenceBackend();
    const transformer = new Transformer(backend, file, dimensions, feedForward, {
      maxBatchTokens: options.maxBatchTokens ?? 512,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.decodeGraphs !== undefined ? { decodeGraphs: options.decodeGraphs } : {}),
      ...(options.lora ? { lora: options.lora } : {}),
    });
    return new Model(file, config, transformer, options);
  }

  /** The tokenizer built from the file's `tokenizer.*` metadata (on first use). */
  get tokenizer(): Tokenizer {
    this.tokenizerInstance ??= Tokenizer.fromGGUFMetadata((key) => this.file.get(key));
    return this.tokenizerInstance;
  }

  get memory(): ModelMemory {
    const d = this.transformer.dimensions;
    const kvType = this.kvType;
    return { fileBytes: this.file.fileBytes, weightBytes: this.transformer.weightBytes, kvBytesPerToken: d.layers * 2 * kvRowBytes(kvType, d.kvWidth), kvType };
  }

  /** The KV element type of this model's caches. */
  get kvType(): KVType {
    return this.loadOptions.kvType ?? "f16";
  }

  get vocabularySize(): number {
    return this.transformer.dimensions.vocabulary;
  }

  /**
   * The tokens a sequence of this model may hold: the file's context_length, or with RoPE scaling
   * (the file's or loadModel's ropeScaling) its factor times the context trained before scaling.
   */
  get contextLength(): number {
    const scaling = this.loadOptions.ropeScaling === undefined ? undefined : parseOptions(ropeScalingOptionsSchema, this.loadOptions.ropeScaling);
    return scaledContextLength(this.config, this.config.keyLength, scaling);
  }

  /**
   * A paged KV cache for one sequence of up to `capacity` tokens (default: the model's context
   * length), over a pool of its own. `type` overrides the model's KV element type.
   */
  createCache(capacity = this.contextLength, options: { readonly type?: KVType } = {}): PagedKVCache {
    const d = this.transformer.dimensions;
    return PagedKVCache.standalone(this.transformer.backend, {
      layerBackends: this.transformer.layerBackends,
      layers: d.layers,
      kvWidth: d.kvWidth,
      capacity,
      type: options.type ?? this.kvType,
      blockTokens: this.loadOptions.kvBlockTokens ?? DEFAULT_BLOCK_TOKENS,
    });
  }

  /** A pool of `blocks` KV blocks that many sequences share (see KVBlockPool.createSequence). */
  createKVPool(blocks: number, options: { readonly type?: KVType; readonly blockTokens?: number } = {}): KVBlockPool {
    const d = this.transformer.dimensions;
    return new KVBlockPool(this.transformer.backend, {
      layerBackends: this.transformer.layerBackends,
      layers: d.layers,
      kvWidth: d.kvWidth,
      blocks,
      type: options.type ?? this.kvType,
      blockTokens: options.blockTokens ?? this.loadOptions.kvBlockTokens ?? DEFAULT_BLOCK_TOKENS,
    });
  }

  /**
   * The engine that runs every generate/chat call of this model in shared batched steps, over one
   * KV pool of `kvCacheTokens` tokens (created on first use).
   */
  get engine(): InferenceEngine {
    if (!this.engineInstance) {
      const blockTokens = this.loadOptions.kvBlockTokens ?? DEFAULT_BLOCK_TOKENS;
      const tokens = this.loadOptions.kvCacheTokens ?? Math.min(this.contextLength, 8192);
      this.engineInstance = new InferenceEngine(this.transformer, {
        blocks: Math.ceil(tokens / blockTokens),
        blockTokens,
        kvType: this.kvType,
        maxSequences: this.loadOptions.maxSequences ?? 16,
      });
    }
    return this.engineInstance;
  }

  /** See Transformer.forward: runs tokens after what the cache holds, returns logits. */
  forward(tokens: Int32Array | readonly number[], cache: KVCache, options?: ForwardOptions): Float32Array {
    const ids = tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.transformer.forward(ids, cache, options);
  }

  /** See Transformer.forwardGreedy: runs tokens after what the cache holds, returns the greedy next token. */
  forwardGreedy(tokens: Int32Array | readonly number[], cache: KVCache): number {
    const ids = tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.transformer.forwardGreedy(ids, cache);
  }

  /** See Transformer.forwardLogprobs: runs tokens after what the cache holds, returns log p(targets[i]) after row rows[i]. */
  forwardLogprobs(tokens: Int32Array | readonly number[], cache: KVCache, rows: readonly number[], targets: Int32Array | readonly number[]): Float64Array {
    const ids = tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.transformer.forwardLogprobs(ids, cache, rows, targets instanceof Int32Array ? targets : Int32Array.from(targets));
  }

  /**
   * Generates a continuation, streamed: `for await (const chunk of model.generate(prompt))`.
   * A string prompt is completed as is (special tokens in it are parsed unless `special: false`);
   * messages are rendered with the chat template first. `await stream.result` afterwards gives the
   * whole text, finish reason, usage and timings.
   */
  generate<Schema extends z.ZodType>(
    prompt: string | readonly number[] | readonly ChatMessage[],
    options: (GenerateOptions | ChatOptions) & { readonly schema: Schema },
  ): GenerationStream<StructuredGenerationResult<z.output<Schema>>>;
  generate(prompt: string | readonly number[] | readonly ChatMessage[], options?: GenerateOptions | ChatOptions): GenerationStream;
  generate(prompt: string | readonly number[] | readonly ChatMessage[], options: GenerateOptions | ChatOptions = {}): GenerationStream {
    return this.startGeneration(prompt, options).stream;
  }

  /** `generate`, with the tool handling of a chat prompt (undefined for a text or token prompt). */
  private startGeneration(prompt: string | readonly number[] | readonly ChatMessage[], options: GenerateOptions | ChatOptions): { stream: GenerationStream; tools: ToolTurn | undefined } {
    const isMessages = Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] === "object";
    const resolved = isMessages ? parseOptions(chatOptionsSchema, options) : parseOptions(generateOptionsSchema, options);
    const tools = isMessages ? toolTurn(resolved as ResolvedChatOptions) : undefined;
    const promptTokens = this.promptTokens(prompt, resolved.special, tools?.enableThinking ?? true, tools?.tools);
    // A context that shifts is the model's or the KV pool's, whichever is smaller (llama.cpp's n_ctx).
    if (resolved.contextTokens !== undefined && resolved.contextTokens > this.contextLength) throw new InvalidOptionError("contextTokens", `contextTokens (${resolved.contextTokens}) exceeds the model's context length (${this.contextLength})`);
    const context = resolved.contextTokens ?? (resolved.contextShift === false ? this.contextLength : Math.min(this.contextLength, this.engine.pool.blocks * this.engine.pool.blockTokens));
    const sequence = this.engine.createSequence(Math.min(context, promptTokens.length + resolved.maxTokens), this.sequenceOptions(resolved.lora));
    const stream = generateTokens({ model: this, promptTokens, sequence, cachedTokens: 0, options: withToolGrammar(resolved, tools), onFinish: () => sequence.release() });
    return { stream, tools };
  }

  /**
   * Fills the gap between a prefix and a suffix (fill-in-the-middle, for code completion with a
   * model trained for it, such as Qwen3-Coder), streamed as `generate` streams. The prompt is the
   * one llama.cpp's server builds for /infill (see `infillPromptTokens`): the prefix keeps the
   * last 3/4 of `batchTokens` (default 2,048), the suffix the first 1/4, and the extra files what
   * the context leaves after the batch and twice `maxTokens`. `minIndent`, `maxTimeMs` and
   * `maxTimeAfterNewline` are the options code completion usually adds.
   */
  infill(input: InfillInput, options: GenerateOptions & { readonly batchTokens?: number; readonly suffixFirst?: boolean } = {}): GenerationStream {
    const parsedInput = infillInputSchema.safeParse(input);
    if (!parsedInput.success) {
      const issue = parsedInput.error.issues[0]!;
      const path = issue.path.map(String).join(".");
      throw new InvalidOptionError(path || "input", issue.code === "unrecognized_keys" ? `unknown infill input ${issue.keys.map((k) => `"${k}"`).join(", ")}` : issue.message);
    }
    const { batchTokens = DEFAULT_INFILL_BATCH_TOKENS, suffixFirst = false, ...rest } = options;
    if (!Number.isInteger(batchTokens) || batchTokens < 4) throw new InvalidOptionError("batchTokens", "batchTokens must be an integer of at least 4");
    const resolved = parseOptions(generateOptionsSchema, rest);
    const promptTokens = infillPromptTokens(this.tokenizer, parsedInput.data, { batchTokens, contextTokens: this.contextLength, predictTokens: resolved.maxTokens, suffixFirst });
    const sequence = this.engine.createSequence(Math.min(this.contextLength, promptTokens.length + resolved.maxTokens), this.sequenceOptions(resolved.lora));
    return generateTokens({ model: this, promptTokens, sequence, cachedTokens: 0, options: resolved, onFinish: () => sequence.release() });
  }

  /**
   * How likely the model finds each prompt token after the ones before it (vLLM's
   * `prompt_logprobs`, OpenAI's legacy `echo` with `logprobs`): log p(token) under the softmax of
   * the raw logits, null for the first token; with `topLogprobs` (0 to 20) also the most likely
   * tokens at each position. Evaluated through the engine, 32 rows at a time (beside running
   * generations; its full blocks stay in the prefix cache for a generation that follows). A text
   * is tokenized as `generate` tokenizes it (special tokens parsed unless `special: false`).
   */
  async promptLogprobs(
    prompt: string | readonly number[],
    options: { readonly topLogprobs?: number; readonly special?: boolean; readonly signal?: AbortSignal; readonly lora?: readonly { readonly id: number; readonly scale: number }[] } = {},
  ): Promise<PromptLogprobs> {
    const tokens = typeof prompt === "string" ? this.tokenizer.encode(prompt, { special: options.special ?? true }) : [...prompt];
    this.checkInputTokens("promptLogprobs", tokens);
    const count = options.topLogprobs ?? 0;
    if (!Number.isInteger(count) || count < 0 || count > 20) throw new InvalidOptionError("topLogprobs", "topLogprobs must be an integer from 0 to 20");
    const sequence = this.engine.createSequence(tokens.length, this.sequenceOptions(options.lora));
    const logprobs: (number | null)[] = [null];
    const tops: (TokenLogprob[] | null)[] = [null];
    const ranks: (number | null)[] = [null];
    const vocabulary = this.vocabularySize;
    try {
      for (let start = 0; start < tokens.length - 1; start += PROMPT_LOGPROB_ROWS) {
        const chunk = tokens.slice(start, Math.min(start + PROMPT_LOGPROB_ROWS, tokens.length - 1));
        const rows = await sequence.evaluateRows(chunk, chunk.length, { ...(options.signal ? { signal: options.signal } : {}) });
        if (rows === undefined || !("logits" in rows)) throw options.signal?.reason ?? new Error("promptLogprobs was aborted");
        for (let r = 0; r < chunk.length; r++) {
          const row = rows.logits.subarray(r * vocabulary, (r + 1) * vocabulary);
          const logit = row[tokens[start + r + 1]!]!;
          logprobs.push(logit - logSumExp(row));
          let above = 0;
          for (let i = 0; i < vocabulary; i++) if (row[i]! > logit) above++;
          ranks.push(above + 1);
          tops.push(count > 0 ? topLogprobs(row, count) : []);
        }
      }
    } finally {
      sequence.release();
    }
    return { tokens, logprobs, topLogprobs: tops, ranks };
  }

  /** The engine sequence options of a generation's `lora` option. */
  private sequenceOptions(lora: readonly { readonly id: number; readonly scale: number }[] | undefined): { loraScales?: number[] } {
    const loraScales = loraScalesOf(this.transformer.loraAdapters.length, lora);
    return loraScales ? { loraScales } : {};
  }

  /**
   * The LoRA adapters loaded with the model (loadModel's `lora`), in order (a generation's
   * `lora` option names them by index), each with the scale generations run with unless they give
   * their own.
   */
  get loraAdapters(): readonly { readonly id: number; readonly path: string; readonly scale: number }[] {
    return this.transformer.loraAdapters.map((adapter, id) => ({ id, ...adapter }));
  }

  /**
   * Sets the adapters' scales for the generations started from now on without a `lora` option
   * (llama.cpp server's POST /lora-adapters): listed adapters take their scale, the others 0.
   */
  setLoraScales(lora: readonly { readonly id: number; readonly scale: number }[]): void {
    this.transformer.setLoraScales(loraScalesOf(this.transformer.loraAdapters.length, lora)!);
  }

  /** `generate`, awaited: the whole result. */
  complete<Schema extends z.ZodType>(prompt: string | readonly number[], options: GenerateOptions & { readonly schema: Schema }): Promise<StructuredGenerationResult<z.output<Schema>>>;
  complete(prompt: string | readonly number[], options?: GenerateOptions): Promise<GenerationResult>;
  async complete(prompt: string | readonly number[], options: GenerateOptions = {}): Promise<GenerationResult> {
    const stream = this.generate(prompt, options);
    for await (const _chunk of stream) {
      // drain
    }
    return stream.result;
  }

  /** How `embed` pools by default: the GGUF's pooling_type (Qwen3-Embedding: last), else the last token. */
  get pooling(): Pooling {
    return poolingOfGGUF(this.config.poolingType) ?? "last";
  }

  /**
   * The embedding of a text (or of tokens): the hidden states after the final norm, pooled (see
   * `pooling`), as llama.cpp's embedding context computes them, then normalized to unit length
   * unless `normalize: false`. A text is tokenized with the vocabulary's BOS/EOS flags
   * (Qwen3-Embedding appends EOS, whose row "last" pooling takes). Runs in a KV cache of its own,
   * between the engine's steps.
   */
  embed(input: string | readonly number[], options: EmbedOptions = {}): Float32Array {
    const resolved = parseOptions(embedOptionsSchema, options);
    const width = this.transformer.dimensions.embedding;
    checkDimensions(resolved.dimensions, width);
    const tokens = typeof input === "string" ? this.tokenizer.encode(input, { special: resolved.special }) : [...input];
    const pooling = resolved.pooling ?? this.pooling;
    const hidden = this.hiddenRows("embed", tokens, pooling === "mean" ? "all" : "last");
    return poolEmbedding(hidden, width, pooling, resolved.normalize, resolved.dimensions);
  }

  /**
   * `embed` through the engine: the input is one more sequence of the engine's batched steps
   * (chunked prefill beside running generations, the prefix cache), so a server's embedding
   * requests do not stop its generations for their whole length, and several inputs awaited
   * together are evaluated together. The same vector as `embed` (within the backend's batching
   * rounding). Mean pooling evaluates every row (none from the prefix cache). `signal` aborting
   * first rejects with its reason.
   */
  async embedAsync(input: string | readonly number[], options: EmbedOptions & { readonly signal?: AbortSignal } = {}): Promise<Float32Array> {
    const { signal, ...rest } = options;
    const resolved = parseOptions(embedOptionsSchema, rest);
    const width = this.transformer.dimensions.embedding;
    checkDimensions(resolved.dimensions, width);
    const pooling = resolved.pooling ?? this.pooling;
    const tokens = typeof input === "string" ? this.tokenizer.encode(input, { special: resolved.special }) : [...input];
    const hidden = await this.engineHidden("embed", tokens, signal, pooling === "mean" ? tokens.length : 0);
    return poolEmbedding(hidden, width, pooling, resolved.normalize, resolved.dimensions);
  }

  /** The last token's hidden row after the final norm (or the last `rows` rows), evaluated as a sequence of the engine (a copy). */
  private async engineHidden(caller: string, tokens: readonly number[], signal: AbortSignal | undefined, rows = 0): Promise<Float32Array> {
    this.checkInputTokens(caller, tokens);
    const sequence = this.engine.createSequence(tokens.length);
    try {
      const hidden = await sequence.evaluateHidden(tokens, signal, Number.POSITIVE_INFINITY, rows);
      if (hidden === undefined) throw signal?.reason ?? new Error(`${caller}: aborted`);
      return hidden.slice();
    } finally {
      sequence.release();
    }
  }

  /** The hidden rows after the final norm of one input, computed in a KV cache of its own (embed, rank). */
  private hiddenRows(caller: string, tokens: readonly number[], rows: "last" | "all"): Float32Array {
    this.checkInputTokens(caller, tokens);
    const cache = this.createCache(tokens.length);
    try {
      return this.transformer.forwardHidden(Int32Array.from(tokens), cache, rows);
    } finally {
      cache.dispose();
    }
  }

  private checkInputTokens(caller: string, tokens: readonly number[]): void {
    if (tokens.length === 0) throw new RangeError(`${caller}: the input has no tokens`);
    if (tokens.length > this.contextLength) throw new RangeError(`${caller}: the input has ${tokens.length} tokens, the model's context holds ${this.contextLength}`);
    const vocabulary = this.vocabularySize;
    const bad = tokens.find((token) => !Number.isInteger(token) || token < 0 || token >= vocabulary);
    if (bad !== undefined) throw new RangeError(`${caller}: token ${bad} is outside the vocabulary (0..${vocabulary - 1})`);
  }

  /**
   * The reranker's classification head (`cls.output.weight`, as llama.cpp's converter writes it for
   * Qwen3-Reranker), or undefined for a model without one.
   */
  get classifier(): ClassifierHead | undefined {
    if (this.classifierInstance === undefined) this.classifierInstance = ClassifierHead.fromGGUF(this.file, this.transformer.dimensions.embedding) ?? null;
    return this.classifierInstance ?? undefined;
  }

  /** The reranker's prompt with `{query}` and `{document}` (`tokenizer.chat_template.rerank`), if the GGUF has one. */
  get rerankTemplate(): string | undefined {
    return rerankTemplateOf(this.file);
  }

  /**
   * A reranker's relevance score for one tokenized query–document prompt: llama.cpp's rank pooling
   * (see ClassifierHead), a probability in [0, 1]. Runs in a KV cache of its own.
   */
  rankTokens(tokens: readonly number[]): number {
    const head = this.requireClassifier();
    return head.score(this.hiddenRows("rank", tokens, "last"));
  }

  /**
   * `rankTokens` of several prompts, in their order. A leading run of tokens they all share (the
   * template's head and the query) is evaluated once, and each prompt's KV cache forks from it
   * (copy-on-write), so that only each prompt's own tokens are computed: the same KV rows and the
   * same last hidden row as each prompt alone.
   */
  rankPrompts(prompts: readonly (readonly number[])[]): number[] {
    const head = this.requireClassifier();
    for (const tokens of prompts) this.checkInputTokens("rank", tokens);
    const shared = sharedPrefixLength(prompts);
    const blockTokens = this.loadOptions.kvBlockTokens ?? DEFAULT_BLOCK_TOKENS;
    if (shared < blockTokens) return prompts.map((tokens) => head.score(this.hiddenRows("rank", tokens, "last")));
    const longest = Math.max(...prompts.map((tokens) => tokens.length));
    // The shared blocks, one prompt's own blocks, and a copy of a shared block that is not full.
    const pool = this.createKVPool(Math.ceil(shared / blockTokens) + Math.ceil((longest - shared) / blockTokens) + 1);
    const prefix = pool.createSequence(longest);
    try {
      this.transformer.forwardHidden(Int32Array.from(prompts[0]!.slice(0, shared)), prefix, "last");
      return prompts.map((tokens) => {
        const own = prefix.fork(tokens.length);
        try {
          return head.score(this.transformer.forwardHidden(Int32Array.from(tokens.slice(shared)), own, "last"));
        } finally {
          own.dispose();
        }
      });
    } finally {
      prefix.dispose();
      pool.dispose();
    }
  }

  /**
   * Scores `documents` against `query` with a reranker (Qwen3-Reranker): each pair is put in the
   * rerank template and tokenized whole, as llama.cpp's server does, and scored as `rankPrompts`.
   * Returns the documents best first (ties in their given order), `topN` of them when given.
   */
  rank(query: string, documents: readonly string[], options: RankOptions = {}): RankedDocument[] {
    const resolved = parseOptions(rankOptionsSchema, options);
    const prompts = this.rankingPrompts(query, documents, resolved.template);
    return rankedDocuments(prompts, this.rankPrompts(prompts), resolved.topN);
  }

  /**
   * `rankPrompts` through the engine (see `embedAsync`): the prompts' shared head is evaluated
   * first, as a sequence whose full blocks stay in the prefix cache, then every prompt as a sequence
   * of its own, together in batched steps, each reusing those blocks. `signal` aborting first
   * rejects with its reason.
   */
  async rankPromptsAsync(prompts: readonly (readonly number[])[], signal?: AbortSignal): Promise<number[]> {
    const head = this.requireClassifier();
    for (const tokens of prompts) this.checkInputTokens("rank", tokens);
    const shared = sharedPrefixLength(prompts);
    if (shared >= (this.loadOptions.kvBlockTokens ?? DEFAULT_BLOCK_TOKENS)) await this.engineHidden("rank", prompts[0]!.slice(0, shared), signal);
    const rows = await Promise.all(prompts.map((tokens) => this.engineHidden("rank", tokens, signal)));
    return rows.map((hidden) => head.score(hidden));
  }

  /** `rank` through the engine (see `rankPromptsAsync`). */
  async rankAsync(query: string, documents: readonly string[], options: RankOptions & { readonly signal?: AbortSignal } = {}): Promise<RankedDocument[]> {
    const { signal, ...rest } = options;
    const resolved = parseOptions(rankOptionsSchema, rest);
    const prompts = this.rankingPrompts(query, documents, resolved.template);
    return rankedDocuments(prompts, await this.rankPromptsAsync(prompts, signal), resolved.topN);
  }

  /** Each document's prompt: the template (the GGUF's unless given) with the pair in it, tokenized whole. */
  private rankingPrompts(query: string, documents: readonly string[], template: string | undefined): number[][] {
    this.requireClassifier();
    const resolvedTemplate = template ?? this.rerankTemplate;
    if (resolvedTemplate === undefined) throw new InvalidOptionError("template", `the model has no rerank template (${TOKENIZER_KEYS.rerankChatTemplate}); pass one with {query} and {document}`);
    checkRerankTemplate(resolvedTemplate);
    return documents.map((document) => this.tokenizer.encode(rerankPrompt(resolvedTemplate, query, document), { special: true }));
  }

  private requireClassifier(): ClassifierHead {
    const head = this.classifier;
    if (!head) throw new ModelTensorError(CLASSIFIER_TENSOR, "absent: the model is not a reranker (llama.cpp's converter writes this head for Qwen3-Reranker)");
    return head;
  }

  /** One chat turn over `messages` (chat template applied): reasoning and answer apart. */
  async chat(messages: readonly ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    if (messages.length === 0) throw new RangeError("chat needs at least one message");
    const { stream, tools } = this.startGeneration(messages, options);
    for await (const _chunk of stream) {
      // drain
    }
    return withReasoning(await stream.result, tools?.parseCalls ?? false);
  }

  /** A multi-turn conversation that reuses its KV cache for the shared prefix of every turn. */
  createChatSession(options: ChatSessionOptions = {}): ChatSession {
    return new ChatSession(this, options);
  }

  /**
   * What the keys and values of this model depend on, as 16 hex digits (see modelFingerprint): a
   * saved KV state loads only into a model of the same fingerprint.
   */
  get fingerprint(): string {
    this.fingerprintValue ??= modelFingerprint(this.file, this.transformer.dimensions);
    return this.fingerprintValue;
  }

  /**
   * Saves the keys and values of `prompt` to a file (evaluating the tokens the prefix cache does
   * not hold), so that a later process skips evaluating them: llama-cli's `--prompt-cache`. A text
   * is tokenized as `generate` tokenizes it. `metadata` (JSON) is kept beside the state. The file is
   * written beside `path` and renamed over it. See loadState.
   */
  async saveState(
    path: string,
    prompt: string | readonly number[],
    options: { readonly special?: boolean; readonly signal?: AbortSignal; readonly lora?: readonly { readonly id: number; readonly scale: number }[]; readonly metadata?: unknown } = {},
  ): Promise<SavedState> {
    const tokens = typeof prompt === "string" ? this.tokenizer.encode(prompt, { special: options.special ?? true }) : [...prompt];
    this.checkInputTokens("saveState", tokens);
    const sequence = this.engine.createSequence(tokens.length, this.sequenceOptions(options.lora));
    try {
      if ((await sequence.evaluateGreedy(tokens, options.signal)) === undefined) throw options.signal?.reason ?? new Error("saveState was aborted");
      return await saveSequenceState(this, path, sequence, options.metadata, options.signal);
    } finally {
      sequence.release();
    }
  }

  /**
   * Loads a state saved by saveState or ChatSession.saveState (by this model: the same weights, on
   * any backend and KV type) into the prefix cache of the engine: every generation whose prompt
   * starts with its tokens skips evaluating them, as long as the blocks stay cached (they are
   * evicted as other cached prefixes are, least recently used first). A state computed with LoRA
   * scales is reused by generations with the same scales (the result's `lora`). A file that is
   * damaged or was saved by another model is a KVStateError naming it.
   */
  loadState(path: string): LoadedState {
    return loadState(this, path);
  }

  /**
   * The chat session a ChatSession.saveState saved: its messages, and its keys and values loaded
   * into the prefix cache, so that the next turn evaluates only the new message. The session runs
   * with the LoRA scales the state was computed with unless `options.lora` says otherwise.
   */
  restoreChatSession(path: string, options: Omit<ChatSessionOptions, "messages" | "system"> = {}): ChatSession {
    const state = loadState(this, path);
    const parsed = savedChatSchema.safeParse(state.metadata);
    if (!parsed.success) throw new KVStateError(path, "holds no chat session (its metadata has no messages: saved by Model.saveState?)");
    const session = new ChatSession(this, { ...(state.lora ? { lora: state.lora } : {}), ...options, messages: parsed.data.messages as unknown as ChatMessage[] });
    if (parsed.data.dropped !== undefined) session.leaveOut(parsed.data.dropped);
    return session;
  }

  private promptTokens(prompt: string | readonly number[] | readonly ChatMessage[], special: boolean, enableThinking: boolean, tools?: readonly ChatToolDefinition[]): number[] {
    if (typeof prompt === "string") return this.tokenizer.encode(prompt, { special });
    if (prompt.length === 0) throw new RangeError("the prompt is empty");
    if (typeof prompt[0] === "number") return [...(prompt as readonly number[])];
    const text = this.tokenizer.applyChatTemplate(prompt as readonly ChatMessage[], { addGenerationPrompt: true, enableThinking, ...(tools ? { tools } : {}) });
    return this.tokenizer.encode(text, { special: true });
  }

  dispose(): void {
    this.engineInstance?.dispose();
    for (const backend of this.transformer.backends) backend.dispose();
  }
}

/** The metadata ChatSession.saveState keeps: the session's messages (checked as objects with a role). */
const savedChatSchema = z.object({ messages: z.array(z.looseObject({ role: z.string() })), dropped: z.number().int().nonnegative().optional() });

/** Opens a GGUF file (memory-mapped) and builds its model on a backend. */
export function loadModel(path: string, options: LoadModelOptions = {}): Model {
  return Model.create(applyMetadataOverrides(openGGUFModel(path), options.metadataOverrides ?? []), options);
}
