import type { KVStorage } from "./backend";

/**
 * What a model needs from a KV cache: one sequence's view of paged storage. The model does not
 * own it: the caller creates one per sequence and passes it to every forward. Sequences of one
 * pool can run in one batched forward (PagedKVCache is the implementation).
 */
export interface KVCache {
  /** Tokens stored and visible (the position of the next token). */
  readonly length: number;
  /** Tokens the cache can hold. */
  readonly capacity: number;
  /** Bytes of the blocks this sequence holds (a block shared with others counts in full). */
  readonly bytes: number;
  /** The storage the sequence's blocks live in: per layer K and V, `blockTokens` slots per block. */
  readonly storage: KVPoolStorage;
  /** Block ids of this sequence, in token order. */
  readonly blockTable: readonly number[];
  /**
   * Makes room for `rows` more tokens (new blocks; copy-on-write of a shared block about to be
   * written) and returns the slots rows [length, length + rows) go to.
   * @throws KVCacheFullError when the sequence's capacity or the pool's blocks do not suffice.
   */
  prepare(rows: number): Int32Array;
  /** After every layer has written `tokens`' keys and values, makes them part of `length`. */
  advance(tokens: Int32Array): void;
  /** Forgets tokens from `length` on (to rewind or to reuse a shared prefix). */
  trim(length: number): void;
  dispose(): void;
}

/** Where the keys and values of a pool's blocks are: one K and one V storage per layer. */
export interface KVPoolStorage {
  readonly keys: readonly KVStorage[];
  readonly values: readonly KVStorage[];
  readonly blockTokens: number;
}

export class KVCacheFullError extends Error {
  override readonly name = "KVCacheFullError";
  constructor(needed: number, capacity: number, what = "capacity") {
    super(`KV cache full: ${needed} tokens needed, ${what} ${capacity}`);
  }
}

/** The pool has no free block left (every block is held by a running sequence). */
export class KVBlocksExhaustedError extends KVCacheFullError {
  override readonly name = "KVCacheFullError";
  constructor(
    readonly blocksNeeded: number,
    readonly blocksFree: number,
  ) {
    super(blocksNeeded, blocksFree, "free blocks");
    this.message = `KV cache full: ${blocksNeeded} blocks needed, ${blocksFree} free`;
  }
}
