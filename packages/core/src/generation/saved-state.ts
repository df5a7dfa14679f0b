/**
 * Saving and loading the KV state of a model's engine sequences (Model.saveState, loadState,
 * ChatSession.saveState, Model.restoreChatSession): the file format is kv-state.ts's.
 */
import { basename } from "node:path";
import { kvRowBytes } from "../backend";
import { type EngineSequence, loraPrefixSalt } from "../engine/inference-engine";
import { KVBlocksExhaustedError } from "../kv-cache";
import { KVStateError, type KVStateHeader, openKVStateFile, writeKVStateFile } from "../kv-state";
import type { Model } from "../load-model";
import type { KVBlockPool } from "../paged-kv-cache";

/** What saving a state wrote. */
export interface SavedState {
  /** Tokens whose keys and values the file holds. */
  readonly tokens: number;
  readonly bytes: number;
}

/** What loading a state did. */
export interface LoadedState {
  /** The tokens the file holds. */
  readonly tokens: readonly number[];
  /** Of them, the tokens now in the prefix cache (whole KV blocks; the rest is evaluated when used). */
  readonly cachedTokens: number;
  /** The LoRA scales the state was computed with (a generation's `lora` option), when any adapter's was not 0. */
  readonly lora?: readonly { readonly id: number; readonly scale: number }[];
  /** What the saver kept beside the state (a chat session's messages). */
  readonly metadata: unknown;
}

/** Rows of `tokens` tokens of one layer's keys or values, read through a block table. */
function cacheRows(pool: KVBlockPool, blocks: readonly number[], tokens: number, layer: number, values: boolean): Uint8Array {
  const rowBytes = kvRowBytes(pool.type, pool.kvWidth);
  const out = new Uint8Array(tokens * rowBytes);
  const backend = pool.layerBackends[layer]!;
  const storage = values ? pool.values[layer]! : pool.keys[layer]!;
  for (let block = 0; block * pool.blockTokens < tokens; block++) {
    const count = Math.min(pool.blockTokens, tokens - block * pool.blockTokens);
    out.set(backend.readKVRows(storage, blocks[block]! * pool.blockTokens, count), block * pool.blockTokens * rowBytes);
  }
  return out;
}

/** Waits until every token given to the sequence is in its cache (evaluating them again after a preemption). */
async function cached(sequence: EngineSequence, signal: AbortSignal | undefined): Promise<void> {
  while (!sequence.cache || sequence.cache.length < sequence.tokens.length) {
    if ((await sequence.evaluateGreedy([], signal)) === undefined) throw signal?.reason ?? new Error("saving the state was aborted");
  }
}

/** Writes the keys and values of every token of the sequence to `path`. */
export async function saveSequenceState(model: Model, path: string, sequence: EngineSequence, metadata: unknown, signal?: AbortSignal): Promise<SavedState> {
  if (sequence.tokens.length > 0) await cached(sequence, signal);
  const cache = sequence.cache;
  const pool = model.engine.pool;
  const tokens = cache ? [...cache.storedTokens] : [];
  const adapters = model.loraAdapters;
  const lora = adapters.flatMap((adapter) => {
    const scale = sequence.loraScales?.[adapter.id] ?? adapter.scale;
    return scale === 0 ? [] : [{ name: basename(adapter.path), scale }];
  });
  const header: KVStateHeader = {
    model: model.fingerprint,
    architecture: model.config.architecture,
    layers: pool.layers,
    kvWidth: pool.kvWidth,
    kvType: pool.type,
    tokens,
    ...(lora.length > 0 ? { lora } : {}),
    ...(metadata === undefined ? {} : { metadata }),
  };
  try {
    const bytes = writeKVStateFile(path, header, (layer, values) => cacheRows(pool, cache?.blockTable ?? [], tokens.length, layer, values));
    return { tokens: tokens.length, bytes };
  } catch (error) {
    throw new KVStateError(path, `cannot be written (${(error as Error).message})`);
  }
}

/** Puts the state of `path` into the model's prefix cache. */
export function loadState(model: Model, path: string): LoadedState {
  const file = openKVStateFile(path);
  const header = file.header;
  const pool = model.engine.pool;
  if (header.model !== model.fingerprint) {
    throw new KVStateError(path, `saved by another model (${header.architecture}, ${header.layers} layers, fingerprint ${header.model}; this model's is ${model.fingerprint})`);
  }
  if (header.layers !== pool.layers || header.kvWidth !== pool.kvWidth) throw new KVStateError(path, `${header.layers} layers of ${header.kvWidth} KV values; the model has ${pool.layers} of ${pool.kvWidth}`);
  const bad = header.tokens.find((token) => token >= model.vocabularySize);
  if (bad !== undefined) throw new KVStateError(path, `token ${bad} is outside the vocabulary (0..${model.vocabularySize - 1})`);
  if (header.tokens.length > model.contextLength) throw new KVStateError(path, `${header.tokens.length} tokens; the model's context holds ${model.contextLength}`);
  // Scales by adapter, named by file: the sequences that may reuse the state run with the same ones.
  const adapters = model.loraAdapters;
  const scales = adapters.map(() => 0);
  for (const saved of header.lora ?? []) {
    const adapter = adapters.find((candidate) => basename(candidate.path) === saved.name);
    if (!adapter) throw new KVStateError(path, `computed with the LoRA adapter ${saved.name} (scale ${saved.scale}), which the model has not loaded`);
    scales[adapter.id] = saved.scale;
  }
  const salt = adapters.length > 0 ? loraPrefixSalt(Float64Array.from(scales)) : undefined;
  let cachedTokens: number;
  try {
    cachedTokens = pool.importPrefix(header.tokens, (layer, values, first, count) => file.rows(layer, values, first, count, pool.type), salt);
  } catch (error) {
    if (!(error instanceof KVBlocksExhaustedError)) throw error;
    throw new KVStateError(path, `${header.tokens.length} tokens need ${error.blocksNeeded} free KV blocks of ${pool.blockTokens} tokens; the pool has ${error.blocksFree} (raise kvCacheTokens)`);
  }
  const lora = scales.flatMap((scale, id) => (scale === 0 ? [] : [{ id, scale }]));
  return { tokens: header.tokens, cachedTokens, ...(lora.length > 0 ? { lora } : {}), metadata: header.metadata };
}
