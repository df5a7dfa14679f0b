/**
 * The paged KV cache (vLLM's PagedAttention layout): a pool of fixed-size blocks per layer, a block
 * table per sequence, reference counts so that sequences share blocks, copy-on-write when a shared
 * block is about to be written, and automatic prefix caching: a full block is keyed by the hash of
 * its parent block's key and its tokens, and stays findable after its last sequence lets go of it,
 * until it is evicted (least recently used first) to make room.
 */
import { type Backend, type KVStorage, type KVType, kvRowBytes } from "./backend";
import { KVBlocksExhaustedError, type KVCache, KVCacheFullError, type KVPoolStorage } from "./kv-cache";

export interface KVBlockPoolOptions {
  readonly layers: number;
  /** kvHeads * headDim */
  readonly kvWidth: number;
  readonly blocks: number;
  /** Tokens per block. Default 16. */
  readonly blockTokens?: number;
  /** Element type of the stored keys and values. Default f16. */
  readonly type?: KVType;
  /** The backend of each layer's K and V storage, when the model is split across backends (default: the pool's backend for all). */
  readonly layerBackends?: readonly Backend[];
}

export const DEFAULT_BLOCK_TOKENS = 16;

/** A block's key for prefix caching: a 64-bit hash chained from the parent block's key. */
export function blockKey(parent: bigint, tokens: ArrayLike<number>): bigint {
  return BigInt.asUintN(64, BigInt(Bun.hash.wyhash(Int32Array.from(tokens), parent)));
}

const ROOT_KEY = 0x6d656d7261n; // "memra"

/** The key a sequence's first block key is chained from: the root, or the root salted. */
function rootKeyOf(prefixSalt: bigint | undefined): bigint {
  return prefixSalt === undefined ? ROOT_KEY : blockKey(ROOT_KEY, bigintWords(prefixSalt));
}

/** A 64-bit salt as two 32-bit words (blockKey hashes int32 words). */
function bigintWords(value: bigint): number[] {
  const word = BigInt.asUintN(64, value);
  return [Number(word & 0xffffffffn) | 0, Number(word >> 32n) | 0];
}

export class KVBlockPool implements KVPoolStorage {
  readonly keys: KVStorage[] = []; // per layer: [blocks * blockTokens, kvWidth]
  readonly values: KVStorage[] = []; // per layer: [blocks * blockTokens, kvWidth]
  readonly blockTokens: number;
  readonly type: KVType;
  readonly blocks: number;
  readonly layers: number;
  readonly kvWidth: number;
  /** The backend each layer's storage lives on. */
  readonly layerBackends: readonly Backend[];
  private readonly referenceCounts: Int32Array; // [blocks]
  /** Free blocks without a prefix key (used first). */
  private readonly free: number[] = [];
  /** Free blocks that keep a prefix key, least recently used first (Map keeps insertion order). */
  private readonly cachedFree = new Map<number, true>();
  private readonly blockByKey = new Map<bigint, number>();
  private readonly keyOfBlock: (bigint | undefined)[];
  private disposed = false;
  /** Prefix-cache lookups that found a block, and tokens they saved. */
  prefixHits = 0;

  constructor(
    readonly backend: Backend,
    options: KVBlockPoolOptions,
  ) {
    const blockTokens = options.blockTokens ?? DEFAULT_BLOCK_TOKENS;
    if (!Number.isInteger(blockTokens) || blockTokens < 1) throw new RangeError(`blockTokens must be a positive integer, got ${blockTokens}`);
    if (!Number.isInteger(options.blocks) || options.blocks < 1) throw new RangeError(`a KV pool needs at least one block, got ${options.blocks}`);
    this.blockTokens = blockTokens;
    this.type = options.type ?? "f16";
    this.blocks = options.blocks;
    this.layers = options.layers;
    this.kvWidth = options.kvWidth;
    if (this.type === "q8_0" && this.kvWidth % 32 !== 0) throw new RangeError(`a q8_0 KV cache needs kvHeads * headDim to be a multiple of 32, got ${this.kvWidth}`);
    if (options.layerBackends && options.layerBackends.length !== this.layers) throw new RangeError(`layerBackends names ${options.layerBackends.length} layers, the pool has ${this.layers}`);
    this.layerBackends = options.layerBackends ?? Array.from({ length: this.layers }, () => backend);
    const slots = this.blocks * blockTokens;
    for (let layer = 0; layer < this.layers; layer++) {
      this.keys.push(this.layerBackends[layer]!.allocateKV(this.type, slots, this.kvWidth));
      this.values.push(this.layerBackends[layer]!.allocateKV(this.type, slots, this.kvWidth));
    }
    this.referenceCounts = new Int32Array(this.blocks);
    this.keyOfBlock = new Array<bigint | undefined>(this.blocks).fill(undefined);
    for (let block = this.blocks - 1; block >= 0; block--) this.free.push(block);
  }

  /** Makes every layer's K and V storage resident now (see KVStorage.prefault); returns the bytes. */
  prefault(): number {
    for (const storage of [...this.keys, ...this.values]) storage.prefault?.();
    return this.bytes;
  }

  /** Bytes of one block across all layers, K and V. */
  get bytesPerBlock(): number {
    return this.layers * 2 * this.blockTokens * kvRowBytes(this.type, this.kvWidth);
  }

  /** Bytes the pool holds on its backend (exact: every layer's K and V storage). */
  get bytes(): number {
    return this.blocks * this.bytesPerBlock;
  }

  /** Blocks a sequence could get now: never used, or free and only kept for prefix reuse. */
  get freeBlocks(): number {
    return this.free.length + this.cachedFree.size;
  }

  /** Blocks held by at least one sequence. */
  get usedBlocks(): number {
    return this.blocks - this.freeBlocks;
  }

  /** Free blocks that still hold a reusable prefix. */
  get cachedBlocks(): number {
    return this.cachedFree.size;
  }

  /**
   * A new sequence over this pool, of up to `capacity` tokens. `prefixSalt`: its blocks' prefix
   * keys start from it, so that only sequences with the same salt share cached prefixes (what the
   * blocks hold depends on more than the tokens: the LoRA scales a sequence runs with).
   */
  createSequence(capacity: number, options: { readonly prefixSalt?: bigint } = {}): PagedKVCache {
    return new PagedKVCache(this, capacity, false, rootKeyOf(options.prefixSalt));
  }

  /**
   * The cached blocks holding the longest prefix of `tokens` in whole blocks (in a sequence or kept
   * for prefix reuse), for sequences of `prefixSalt`; each retained for the caller, who releases them.
   */
  retainCachedPrefix(tokens: readonly number[], prefixSalt?: bigint): number[] {
    const blocks: number[] = [];
    let parent = rootKeyOf(prefixSalt);
    for (let block = 0; (block + 1) * this.blockTokens <= tokens.length; block++) {
      const key = blockKey(parent, tokens.slice(block * this.blockTokens, (block + 1) * this.blockTokens));
      const found = this.blockByKey.get(key);
      if (found === undefined) break;
      this.retain(found);
      blocks.push(found);
      parent = key;
    }
    return blocks;
  }

  /**
   * Puts the keys and values of `tokens` into the prefix cache, whole blocks of them (a saved KV
   * state: see loadKVState), so that sequences of `prefixSalt` whose tokens start with them reuse
   * them. `rows(layer, values, first, count)` gives the stored rows (readKVRows's form) of tokens
   * [first, first + count) of a layer's keys or values. Blocks already cached are kept as they
   * are. Returns the tokens the prefix cache now holds for `tokens`; a KVBlocksExhaustedError when
   * the pool has too few free blocks for them (nothing is changed then).
   */
  importPrefix(tokens: readonly number[], rows: (layer: number, values: boolean, first: number, count: number) => Uint8Array, prefixSalt?: bigint): number {
    const blockTokens = this.blockTokens;
    const keys = this.prefixKeys(tokens, prefixSalt);
    const whole = keys.length;
    // Blocks already cached need no room; the others must fit without evicting each other.
    const missing = keys.filter((key) => !this.blockByKey.has(key)).length;
    const reclaimable = this.free.length + [...this.cachedFree.keys()].filter((block) => !keys.includes(this.keyOfBlock[block]!)).length;
    if (missing > reclaimable) throw new KVBlocksExhaustedError(missing, reclaimable);
    const held: number[] = [];
    try {
      for (let block = 0; block < whole; block++) {
        const key = keys[block]!;
        const cached = this.blockByKey.get(key);
        if (cached !== undefined) {
          this.retain(cached); // not evicted by the allocations of the blocks after it
          held.push(cached);
          continue;
        }
        const target = this.allocateBlock();
        held.push(target);
        for (let layer = 0; layer < this.layers; layer++) {
          const backend = this.layerBackends[layer]!;
          backend.writeKVRows(this.keys[layer]!, target * blockTokens, rows(layer, false, block * blockTokens, blockTokens));
          backend.writeKVRows(this.values[layer]!, target * blockTokens, rows(layer, true, block * blockTokens, blockTokens));
        }
        this.register(target, key);
      }
    } finally {
      for (const block of held) this.release(block);
    }
    return whole * blockTokens;
  }

  /** A block for exclusive use (reference count 1), evicting the least recently used cached prefix when needed. */
  allocateBlock(): number {
    let block = this.free.pop();
    if (block === undefined) {
      const oldest = this.cachedFree.keys().next();
      if (oldest.done) throw new KVBlocksExhaustedError(1, 0);
      block = oldest.value;
      this.cachedFree.delete(block);
      this.forgetKey(block);
    }
    this.referenceCounts[block] = 1;
    return block;
  }

  retain(block: number): void {
    if (this.referenceCounts[block] === 0) this.cachedFree.delete(block);
    this.referenceCounts[block]!++;
  }

  release(block: number): void {
    const count = --this.referenceCounts[block]!;
    if (count > 0) return;
    if (count < 0) throw new Error(`KV block ${block} released more often than retained`);
    if (this.keyOfBlock[block] !== undefined) this.cachedFree.set(block, true);
    else this.free.push(block);
  }

  referenceCount(block: number): number {
    return this.referenceCounts[block]!;
  }

  /** The block holding the tokens of `key`, retained for the caller, or undefined. */
  lookup(key: bigint): number | undefined {
    const block = this.blockByKey.get(key);
    if (block === undefined) return undefined;
    this.retain(block);
    this.prefixHits++;
    return block;
  }

  /** Makes a full block findable by its key (a block of the same key already there wins). */
  register(block: number, key: bigint): void {
    if (this.keyOfBlock[block] !== undefined || this.blockByKey.has(key)) return;
    this.blockByKey.set(key, block);
    this.keyOfBlock[block] = key;
  }

  isRegistered(block: number): boolean {
    return this.keyOfBlock[block] !== undefined;
  }

  /** Removes a block's prefix key (before its contents change). */
  forgetKey(block: number): void {
    const key = this.keyOfBlock[block];
    if (key === undefined) return;
    this.keyOfBlock[block] = undefined;
    if (this.blockByKey.get(key) === block) this.blockByKey.delete(key);
  }

  /** Copies a block's slots (all layers, K and V) to another block. */
  copyBlock(target: number, source: number): void {
    for (let layer = 0; layer < this.layers; layer++) {
      const backend = this.layerBackends[layer]!;
      backend.copyKV(this.keys[layer]!, target * this.blockTokens, source * this.blockTokens, this.blockTokens);
      backend.copyKV(this.values[layer]!, target * this.blockTokens, source * this.blockTokens, this.blockTokens);
    }
  }

  /** The prefix keys of the whole blocks of `tokens`, for sequences of `prefixSalt`, in order. */
  prefixKeys(tokens: readonly number[], prefixSalt?: bigint): bigint[] {
    const keys: bigint[] = [];
    let parent = rootKeyOf(prefixSalt);
    for (let block = 0; (block + 1) * this.blockTokens <= tokens.length; block++) {
      parent = blockKey(parent, tokens.slice(block * this.blockTokens, (block + 1) * this.blockTokens));
      keys.push(parent);
    }
    return keys;
  }

  /**
   * Drops the cached prefix blocks of `tokens` (sequences of `prefixSalt`) that no sequence holds,
   * but those whose key is in `keep`: their keys and values are forgotten and the blocks free
   * (llama.cpp server's slot erase). Blocks a sequence holds keep their key until it lets go.
   * Returns the blocks dropped.
   */
  evictPrefix(tokens: readonly number[], prefixSalt?: bigint, keep: ReadonlySet<bigint> = new Set()): number {
    let dropped = 0;
    for (const key of this.prefixKeys(tokens, prefixSalt)) {
      const block = this.blockByKey.get(key);
      if (block === undefined || keep.has(key) || this.referenceCounts[block] !== 0) continue;
      this.cachedFree.delete(block);
      this.forgetKey(block);
      this.free.push(block);
      dropped++;
    }
    return dropped;
  }

  /** Drops every cached prefix (blocks in use keep theirs until released). */
  clearPrefixCache(): void {
    for (const block of this.cachedFree.keys()) {
      this.forgetKey(block);
      this.free.push(block);
    }
    this.cachedFree.clear();
  }

  /** Gives every layer's K and V storage back to its backend (KVStorage.dispose). Safe twice. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const storage of [...this.keys, ...this.values]) storage.dispose?.();
    this.keys.length = 0;
    this.values.length = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * One sequence's block table over a KVBlockPool. Full blocks are registered for prefix reuse as
 * they fill; `reusePrefix` attaches blocks other sequences left behind.
 */
export class PagedKVCache implements KVCache {
  private readonly table: number[] = [];
  /** Tokens whose keys and values are stored, in order (to key full blocks). */
  private readonly tokens: number[] = [];
  /** Prefix key of each full block, in order. */
  private readonly keys: bigint[] = [];
  /** Full blocks from this one on are not registered for prefix reuse (their rows were shifted: see shift). */
  private unkeyedFrom = Number.POSITIVE_INFINITY;
  private stored = 0;
  private disposed = false;

  constructor(
    readonly pool: KVBlockPool,
    readonly capacity: number,
    /** Whether disposing the sequence disposes the pool (a cache made alone by Model.createCache). */
    private readonly ownsPool: boolean,
    /** The prefix key the first block's key is chained from (see KVBlockPool.createSequence). */
    private readonly rootKey: bigint = ROOT_KEY,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`KV cache capacity must be a positive integer, got ${capacity}`);
  }

  /** A cache over a pool of its own, just big enough for `capacity` tokens. */
  static standalone(backend: Backend, options: Omit<KVBlockPoolOptions, "blocks"> & { readonly capacity: number }): PagedKVCache {
    const blockTokens = options.blockTokens ?? DEFAULT_BLOCK_TOKENS;
    const pool = new KVBlockPool(backend, { ...options, blockTokens, blocks: Math.ceil(options.capacity / blockTokens) });
    return new PagedKVCache(pool, options.capacity, true);
  }

  get length(): number {
    return this.stored;
  }

  get storage(): KVPoolStorage {
    return this.pool;
  }

  get blockTable(): readonly number[] {
    return this.table;
  }

  get bytes(): number {
    return this.table.length * this.pool.bytesPerBlock;
  }

  /** The tokens whose keys and values the sequence holds. */
  get storedTokens(): readonly number[] {
    return this.tokens;
  }

  /** Blocks `prepare(rows)` would take from the pool (new ones and copies of shared ones). */
  blocksNeeded(rows: number): number {
    const blockTokens = this.pool.blockTokens;
    const needed = Math.ceil((this.stored + rows) / blockTokens) - this.table.length;
    const first = Math.floor(this.stored / blockTokens);
    const copy = rows > 0 && first < this.table.length && this.pool.referenceCount(this.table[first]!) > 1 ? 1 : 0;
    return Math.max(0, needed) + copy;
  }

  prepare(rows: number): Int32Array {
    if (this.disposed) throw new Error("the KV cache was disposed");
    const needed = this.stored + rows;
    if (needed > this.capacity) throw new KVCacheFullError(needed, this.capacity);
    const blocks = this.blocksNeeded(rows);
    if (blocks > this.pool.freeBlocks) throw new KVBlocksExhaustedError(blocks, this.pool.freeBlocks);
    const blockTokens = this.pool.blockTokens;
    // The block the first new row lands in may be shared or hold a registered prefix: copy it or unkey it.
    const first = Math.floor(this.stored / blockTokens);
    if (rows > 0 && first < this.table.length) this.makeWritable(first);
    while (this.table.length * blockTokens < needed) this.table.push(this.pool.allocateBlock());
    return this.slotsOf(this.stored, rows);
  }

  advance(tokens: Int32Array): void {
    const length = this.stored + tokens.length;
    if (length > this.table.length * this.pool.blockTokens) throw new KVCacheFullError(length, this.table.length * this.pool.blockTokens, "prepared");
    for (const token of tokens) this.tokens.push(token);
    this.stored = length;
    this.registerFullBlocks();
  }

  /**
   * On an empty sequence: attaches the cached blocks that hold a prefix of `tokens` (whole blocks,
   * leaving at least the last token to evaluate) and returns the number of tokens they hold.
   */
  reusePrefix(tokens: readonly number[]): number {
    if (this.stored !== 0 || this.table.length !== 0) throw new Error("reusePrefix needs an empty sequence");
    const blockTokens = this.pool.blockTokens;
    let parent = this.rootKey;
    for (let block = 0; (block + 1) * blockTokens <= Math.min(tokens.length - 1, this.capacity); block++) {
      const content = tokens.slice(block * blockTokens, (block + 1) * blockTokens);
      const key = blockKey(parent, content);
      const found = this.pool.lookup(key);
      if (found === undefined) break;
      this.table.push(found);
      this.keys.push(key);
      for (const token of content) this.tokens.push(token);
      this.stored += blockTokens;
      parent = key;
    }
    return this.stored;
  }

  trim(length: number): void {
    if (!Number.isInteger(length) || length < 0 || length > this.stored) throw new RangeError(`cannot trim a cache of ${this.stored} tokens to ${length}`);
    const blockTokens = this.pool.blockTokens;
    const keep = Math.ceil(length / blockTokens);
    while (this.table.length > keep) this.pool.release(this.table.pop()!);
    this.tokens.length = length;
    this.keys.length = Math.min(this.keys.length, Math.floor(length / blockTokens));
    if (length === 0) this.unkeyedFrom = Number.POSITIVE_INFINITY;
    this.stored = length;
  }

  /**
   * Context shift (llama.cpp's llama_memory_seq_rm of [keep, keep + discard) then seq_add of -discard
   * to the positions after it): forgets tokens [keep, keep + discard) and moves the rows after them
   * `discard` slots down. `rotateKeys(layer, rows, delta)` gives a layer's key rows (stored form,
   * back to back) as they must be stored after their position changed by `delta`: the caller
   * re-applies RoPE, which the cache knows nothing of; values move as they are. With
   * `rewriteKept`, the kept rows' keys also go through it, with delta 0 (llama.cpp's K shift
   * rotates every cell, and with YaRN a rotation by 0 scales). The blocks written are copied first
   * when shared. From the first block written on, the sequence's blocks are no longer registered
   * for prefix reuse: their rows were computed with tokens the sequence no longer holds. A
   * KVBlocksExhaustedError (nothing changed) when the shared blocks' copies do not fit in the pool.
   */
  shift(
    keep: number,
    discard: number,
    rotateKeys: (layer: number, rows: Uint8Array, delta: number) => Uint8Array,
    options: {
      readonly rewriteKept?: boolean;
      /**
       * Where a layer's keys can be rotated in place on its backend (Backend.rotateKV): a function
       * that rotates the key rows at `slots` by `delta`. Those layers' rows then move on the
       * backend (copyKV) instead of through the host, and rotateKeys is not called for them.
       */
      readonly rotateInPlace?: (layer: number) => ((slots: Int32Array, delta: number) => void) | undefined;
    } = {},
  ): void {
    if (this.disposed) throw new Error("the KV cache was disposed");
    if (!Number.isInteger(keep) || keep < 0) throw new RangeError(`keep must be a non-negative integer, got ${keep}`);
    if (!Number.isInteger(discard) || discard < 1) throw new RangeError(`discard must be a positive integer, got ${discard}`);
    if (keep + discard > this.stored) throw new RangeError(`cannot discard tokens ${keep} to ${keep + discard} of a cache holding ${this.stored}`);
    const pool = this.pool;
    const blockTokens = pool.blockTokens;
    const length = this.stored - discard;
    const moved = length - keep;
    const kept = options.rewriteKept ? keep : 0; // rows [0, kept) are rewritten in place
    const firstWritten = Math.floor((kept > 0 ? 0 : keep) / blockTokens);
    const written = this.table.slice(firstWritten, moved > 0 || kept > 0 ? Math.ceil(length / blockTokens) : firstWritten);
    const shared = written.filter((block) => pool.referenceCount(block) > 1).length;
    if (shared > pool.freeBlocks) throw new KVBlocksExhaustedError(shared, pool.freeBlocks);
    for (let i = 0; i < written.length; i++) this.makeWritable(firstWritten + i);
    for (let layer = 0; layer < pool.layers; layer++) {
      const backend = pool.layerBackends[layer]!;
      const keys = pool.keys[layer]!;
      const inPlace = options.rotateInPlace?.(layer);
      if (inPlace) {
        if (kept > 0) inPlace(this.slotsOf(0, kept), 0);
        if (moved === 0) continue;
        this.moveRows(backend, keys, keep, discard, moved);
        this.moveRows(backend, pool.values[layer]!, keep, discard, moved);
        inPlace(this.slotsOf(keep, moved), -discard);
        continue;
      }
      if (kept > 0) this.writeRows(backend, keys, 0, rotateKeys(layer, this.readRows(backend, keys, 0, kept), 0));
      if (moved === 0) continue;
      this.writeRows(backend, keys, keep, rotateKeys(layer, this.readRows(backend, keys, keep + discard, moved), -discard));
      this.writeRows(backend, pool.values[layer]!, keep, this.readRows(backend, pool.values[layer]!, keep + discard, moved));
    }
    while (this.table.length > Math.ceil(length / blockTokens)) pool.release(this.table.pop()!);
    this.tokens.splice(keep, discard);
    this.keys.length = Math.min(this.keys.length, firstWritten);
    this.unkeyedFrom = Math.min(this.unkeyedFrom, firstWritten);
    this.stored = length;
  }

  /** Before block `index` of the table is written: a copy of it when shared, else its prefix key dropped. */
  private makeWritable(index: number): void {
    const block = this.table[index]!;
    if (this.pool.referenceCount(block) > 1) {
      const copy = this.pool.allocateBlock();
      this.pool.copyBlock(copy, block);
      this.pool.release(block);
      this.table[index] = copy;
    } else {
      this.pool.forgetKey(block);
    }
  }

  /** The slot of position `position`. */
  private slotAt(position: number): number {
    const blockTokens = this.pool.blockTokens;
    return this.table[Math.floor(position / blockTokens)]! * blockTokens + (position % blockTokens);
  }

  /** The slots of positions [from, from + count). */
  private slotsOf(from: number, count: number): Int32Array {
    const slots = new Int32Array(count);
    this.forEachRun(from, count, (slot, offset, rows) => {
      for (let i = 0; i < rows; i++) slots[offset + i] = slot + i;
    });
    return slots;
  }

  /**
   * Moves rows [keep + discard, keep + discard + count) to [keep, keep + count) on the backend, in
   * runs within one source and one target block, none longer than `discard`: a run's source and
   * target never overlap (copyKV may refuse that), and no run reads a row an earlier one wrote.
   */
  private moveRows(backend: Backend, storage: KVStorage, keep: number, discard: number, count: number): void {
    const blockTokens = this.pool.blockTokens;
    for (let offset = 0; offset < count; ) {
      const target = keep + offset;
      const source = target + discard;
      const rows = Math.min(count - offset, discard, blockTokens - (target % blockTokens), blockTokens - (source % blockTokens));
      backend.copyKV(storage, this.slotAt(target), this.slotAt(source), rows);
      offset += rows;
    }
  }

  /** Rows [from, from + count) of one of a layer's storages, in readKVRows's form, back to back. */
  private readRows(backend: Backend, storage: KVStorage, from: number, count: number): Uint8Array {
    const rowBytes = kvRowBytes(this.pool.type, this.pool.kvWidth);
    const bytes = new Uint8Array(count * rowBytes);
    this.forEachRun(from, count, (slot, offset, rows) => bytes.set(backend.readKVRows(storage, slot, rows), offset * rowBytes));
    return bytes;
  }

  /** Stores rows (readKVRows's form) at positions from, from + 1, ... of one of a layer's storages. */
  private writeRows(backend: Backend, storage: KVStorage, from: number, bytes: Uint8Array): void {
    const rowBytes = kvRowBytes(this.pool.type, this.pool.kvWidth);
    this.forEachRun(from, bytes.byteLength / rowBytes, (slot, offset, rows) => backend.writeKVRows(storage, slot, bytes.subarray(offset * rowBytes, (offset + rows) * rowBytes)));
  }

  /** Positions [from, from + count) as runs within one block: (first slot, index of the run's first row, rows). */
  private forEachRun(from: number, count: number, run: (slot: number, offset: number, rows: number) => void): void {
    const blockTokens = this.pool.blockTokens;
    for (let offset = 0; offset < count; ) {
      const position = from + offset;
      const rows = Math.min(count - offset, blockTokens - (position % blockTokens));
      run(this.slotAt(position), offset, rows);
      offset += rows;
    }
  }

  /** A sequence sharing every block of this one (copy-on-write when either writes into a shared block). */
  fork(capacity = this.capacity): PagedKVCache {
    if (this.ownsPool) throw new Error("a standalone KV cache cannot be forked; create sequences from a KVBlockPool");
    const copy = new PagedKVCache(this.pool, capacity, false, this.rootKey);
    if (this.stored > capacity) throw new KVCacheFullError(this.stored, capacity);
    for (const block of this.table) {
      this.pool.retain(block);
      copy.table.push(block);
    }
    copy.tokens.push(...this.tokens);
    copy.keys.push(...this.keys);
    copy.unkeyedFrom = this.unkeyedFrom;
    copy.stored = this.stored;
    return copy;
  }

  /** Releases every block (the cache can be used again from empty). */
  clear(): void {
    this.trim(0);
  }

  dispose(): void {
    if (this.disposed) return;
    this.clear();
    this.disposed = true;
    if (this.ownsPool) this.pool.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  private registerFullBlocks(): void {
    const blockTokens = this.pool.blockTokens;
    const full = Math.min(Math.floor(this.stored / blockTokens), this.unkeyedFrom);
    for (let block = this.keys.length; block < full; block++) {
      const parent = block === 0 ? this.rootKey : this.keys[block - 1]!;
      const key = blockKey(parent, this.tokens.slice(block * blockTokens, (block + 1) * blockTokens));
      this.keys.push(key);
      this.pool.register(this.table[block]!, key);
    }
  }
}
