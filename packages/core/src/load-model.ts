import { type GGUFFile, GGUFError, type ModelConfig, SUPPORTED_ARCHITECTURES, TOKENIZER_KEYS, openGGUF, readModelConfig } from "@memra/gguf";
import { Tokenizer } from "@memra/tokenizer";
import type { Backend } from "./backend";
import { UnsupportedArchitectureError } from "./errors";
import { ContiguousKVCache, type KVCache } from "./kv-cache";
import { type FeedForwardFactory, type ForwardOptions, Transformer, denseFeedForward, modelDimensions } from "./models/qwen3";
import { moeFeedForward } from "./models/qwen3-moe";
import { ReferenceBackend } from "./reference-backend";

export interface LoadModelOptions {
  /** The backend to compute on; the reference (TypeScript) backend when absent. */
  readonly backend?: Backend;
  /** Most tokens one forward step processes (scratch buffers are sized for it). Default 512. */
  readonly maxBatchTokens?: number;
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
    const transformer = new Transformer(backend, file, dimensions, feedForward, { maxBatchTokens: options.maxBatchTokens ?? 512 });
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

  dispose(): void {
    this.transformer.backend.dispose();
  }
}

/** Opens a GGUF file (memory-mapped) and builds its model on a backend. */
export function loadModel(path: string, options: LoadModelOptions = {}): Model {
  return Model.create(openGGUF(path), options);
}
