import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { beforeAll, describe, expect, it } from "vitest";
import { kvRowBytes } from "./backend";
import { KVBlocksExhaustedError, KVCacheFullError } from "./kv-cache";
import { type Model, loadModel } from "./load-model";
import { KVBlockPool } from "./paged-kv-cache";
import { ReferenceBackend } from "./reference-backend";
import { residentFraction } from "./testing/resident-pages";

const tokens = (count: number, start = 1000) => Int32Array.from({ length: count }, (_, i) => start + ((i * 7919) % 5000));

describe("KVBlockPool", () => {
  const backend = new ReferenceBackend();
  const pool = (blocks: number, type: "f32" | "f16" | "q8_0" = "f16") => new KVBlockPool(backend, { layers: 2, kvWidth: 64, blocks, blockTokens: 4, type });

  it("reports exact memory per element type", () => {
    for (const [type, rowBytes] of [
      ["f32", 256],
      ["f16", 128],
      ["q8_0", 68],
    ] as const) {
      expect(kvRowBytes(type, 64)).toBe(rowBytes);
      const p = pool(10, type);
      // 10 blocks × 2 layers × (K and V) × 4 tokens × row bytes
      expect(p.bytes).toBe(10 * 2 * 2 * 4 * rowBytes);
      expect(p.bytesPerBlock).toBe(2 * 2 * 4 * rowBytes);
      const stored = (p.keys[0] as unknown as { bytes: Uint8Array }).bytes.byteLength * 2 * 2;
      expect(stored).toBe(p.bytes);
    }
  });

  it("prefault makes the whole pool resident at once (its memory then stays flat under load)", () => {
    const big = new KVBlockPool(backend, { layers: 2, kvWidth: 6144, blocks: 512, blockTokens: 4, type: "f16" });
    expect(big.bytes).toBe(96 * 2 ** 20);
    const storages = [...big.keys, ...big.values].map((storage) => (storage as unknown as { bytes: Uint8Array }).bytes);
    // each layer's K or V is a 24 MiB buffer, mapped lazily when fresh
    expect(big.prefault()).toBe(big.bytes);
    for (const bytes of storages) expect(residentFraction(bytes)).toBe(1);
  });

  it("allocates blocks as sequences grow, frees them on dispose, and fails when the pool is exhausted", () => {
    const p = pool(3);
    const a = p.createSequence(100);
    expect(a.prepare(5)).toEqual(Int32Array.from([0, 1, 2, 3, 4].map((i) => a.blockTable[Math.floor(i / 4)]! * 4 + (i % 4))));
    a.advance(tokens(5));
    expect(a.blockTable).toHaveLength(2);
    expect(p.usedBlocks).toBe(2);
    const b = p.createSequence(100);
    expect(() => b.prepare(8)).toThrow(KVBlocksExhaustedError);
    expect(() => b.prepare(8)).toThrow(/KV cache full: 2 blocks needed, 1 free/);
    expect(() => p.createSequence(3).prepare(4)).toThrow(KVCacheFullError);
    a.dispose();
    a.dispose();
    expect(p.usedBlocks).toBe(0);
  });

  it("finds a prefix by its block keys, shares it by reference count, and evicts least recently used cached blocks first", () => {
    const p = pool(4);
    const prompt = Array.from(tokens(9));
    const a = p.createSequence(100);
    a.prepare(9);
    a.advance(Int32Array.from(prompt));
    const [a0, a1] = a.blockTable;
    const b = p.createSequence(100);
    // Whole blocks only, and the last token is always left to evaluate: 8 of 9 tokens.
    expect(b.reusePrefix(prompt)).toBe(8);
    expect(b.blockTable).toEqual([a0, a1]);
    expect(p.referenceCount(a0!)).toBe(2);
    // A different second block: only the first one matches.
    const c = p.createSequence(100);
    expect(c.reusePrefix([...prompt.slice(0, 4), 1, 2, 3, 4, 5])).toBe(4);
    c.dispose();
    b.dispose();
    a.dispose();
    expect(p.usedBlocks).toBe(0);
    expect(p.cachedBlocks).toBe(2); // a0, a1 stay findable; the partial third block does not
    // 3 blocks: the 2 never-keyed free ones first, then the least recently released cached one. A
    // sequence releases its blocks last first, so the tail of a prefix (a1) goes before its head.
    const d = p.createSequence(100);
    d.prepare(12);
    expect(p.cachedBlocks).toBe(1);
    expect(d.blockTable).toContain(a1);
    expect(d.blockTable).not.toContain(a0);
    d.dispose();
    expect(p.createSequence(100).reusePrefix(prompt)).toBe(4);
  });

  it("evictPrefix drops the cached blocks of a prefix no sequence holds, but those kept", () => {
    const p = pool(8);
    const prompt = Array.from(tokens(12));
    const a = p.createSequence(100);
    a.prepare(12);
    a.advance(Int32Array.from(prompt));
    // Held by a sequence: nothing is dropped.
    expect(p.evictPrefix(prompt)).toBe(0);
    a.dispose();
    expect(p.cachedBlocks).toBe(3);
    // Another prompt shares the first block: kept by its keys.
    const other = [...prompt.slice(0, 4), 9, 9, 9, 9];
    expect(p.evictPrefix(prompt, undefined, new Set(p.prefixKeys(other)))).toBe(2);
    expect(p.cachedBlocks).toBe(1);
    expect(p.freeBlocks).toBe(8);
    expect(p.createSequence(100).reusePrefix(prompt)).toBe(4);
    // A salt of its own: another chain of keys, nothing of this one found.
    expect(p.evictPrefix(prompt, 7n)).toBe(0);
    expect(p.evictPrefix(prompt)).toBe(0); // the first block is now held by the sequence above
  });

  it("copies a shared block before writing into it (copy-on-write)", () => {
    const p = pool(6, "f32");
    const a = p.createSequence(100);
    a.prepare(6);
    a.advance(tokens(6));
    const b = a.fork();
    expect(b.blockTable).toEqual(a.blockTable);
    expect(b.blocksNeeded(1)).toBe(1); // the shared, partly filled second block is copied
    b.prepare(1);
    expect(b.blockTable[0]).toBe(a.blockTable[0]);
    expect(b.blockTable[1]).not.toBe(a.blockTable[1]);
    expect(p.referenceCount(a.blockTable[1]!)).toBe(1);
  });
});

describe("PagedKVCache.shift (context shift)", () => {
  const backend = new ReferenceBackend();
  const width = 32;
  const pool = (blocks: number) => new KVBlockPool(backend, { layers: 2, kvWidth: width, blocks, blockTokens: 4, type: "f32" });
  /** Appends `count` tokens whose key rows hold 1000 * layer + token and value rows the negation. */
  const append = (cache: ReturnType<KVBlockPool["createSequence"]>, ids: number[]) => {
    const slots = cache.prepare(ids.length);
    for (let layer = 0; layer < 2; layer++) {
      ids.forEach((id, i) => {
        backend.writeKVRows(cache.pool.keys[layer]!, slots[i]!, new Uint8Array(new Float32Array(width).fill(1000 * layer + id).buffer));
        backend.writeKVRows(cache.pool.values[layer]!, slots[i]!, new Uint8Array(new Float32Array(width).fill(-(1000 * layer + id)).buffer));
      });
    }
    cache.advance(Int32Array.from(ids));
  };
  /** The first value of each row of a layer's keys (or values) of the sequence, in position order. */
  const rows = (cache: ReturnType<KVBlockPool["createSequence"]>, layer: number, values = false) =>
    Array.from({ length: cache.length }, (_, position) => {
      const slot = cache.blockTable[Math.floor(position / 4)]! * 4 + (position % 4);
      const bytes = backend.readKVRows((values ? cache.pool.values : cache.pool.keys)[layer]!, slot, 1);
      return new Float32Array(bytes.slice().buffer)[0]!;
    });
  const plusDelta = (calls: number[]) => (_layer: number, bytes: Uint8Array, delta: number) => {
    calls.push(delta);
    const keys = new Float32Array(bytes.slice().buffer).map((value) => value + 0.5 * delta);
    return new Uint8Array(keys.buffer);
  };
  const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

  it("forgets [keep, keep + discard), moves the rest down with their keys transformed, and frees the blocks left over", () => {
    const p = pool(8);
    const cache = p.createSequence(32);
    append(cache, ids(1, 14)); // 4 blocks
    const calls: number[] = [];
    cache.shift(3, 6, plusDelta(calls));
    expect(calls).toEqual([-6, -6]); // the moved keys of each layer, once
    expect(cache.length).toBe(8);
    expect(cache.storedTokens).toEqual([1, 2, 3, 10, 11, 12, 13, 14]);
    expect(cache.blockTable).toHaveLength(2);
    expect(p.usedBlocks).toBe(2);
    expect(rows(cache, 1)).toEqual([1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011]); // moved keys + 0.5 × -6
    expect(rows(cache, 1, true)).toEqual([-1001, -1002, -1003, -1010, -1011, -1012, -1013, -1014]); // values as they were
    // The sequence goes on after the shift.
    append(cache, ids(20, 3));
    expect(rows(cache, 0, true).slice(-4)).toEqual([-14, -20, -21, -22]);
    expect(() => cache.shift(9, 3, plusDelta([]))).toThrow(/cannot discard tokens 9 to 12 of a cache holding 11/);
    expect(() => cache.shift(0, 0, plusDelta([]))).toThrow(/discard must be a positive integer/);
    expect(() => cache.shift(-1, 2, plusDelta([]))).toThrow(/keep must be a non-negative integer/);
  });

  it("with rewriteKept passes the kept keys through the transform at delta 0", () => {
    const cache = pool(8).createSequence(32);
    append(cache, ids(1, 10));
    const calls: number[] = [];
    cache.shift(2, 5, plusDelta(calls), { rewriteKept: true });
    expect(calls).toEqual([0, -5, 0, -5]);
    expect(rows(cache, 0)).toEqual([1, 2, 8 - 2.5, 9 - 2.5, 10 - 2.5]);
  });

  it("moves rows on the backend where keys rotate in place (never a copy onto itself), storing what the host path stores", () => {
    class CopyingBackend extends ReferenceBackend {
      readonly copies: [number, number, number][] = [];
      override copyKV(storage: Parameters<ReferenceBackend["copyKV"]>[0], target: number, source: number, count: number): void {
        this.copies.push([target, source, count]);
        super.copyKV(storage, target, source, count);
      }
    }
    for (const [keep, discard] of [[3, 6], [1, 2], [5, 11], [0, 4], [2, 27]] as const) {
      const viaHost = pool(12).createSequence(48);
      const copying = new CopyingBackend();
      const inPlace = new KVBlockPool(copying, { layers: 2, kvWidth: width, blocks: 12, blockTokens: 4, type: "f32" }).createSequence(48);
      append(viaHost, ids(1, 30));
      append(inPlace, ids(1, 30));
      viaHost.shift(keep, discard, plusDelta([]), { rewriteKept: true });
      const deltas: number[] = [];
      inPlace.shift(keep, discard, () => expect.unreachable("rows through the host"), {
        rewriteKept: true,
        rotateInPlace: (layer) => (slots, delta) => {
          deltas.push(delta);
          for (const slot of slots) {
            const row = new Float32Array(copying.readKVRows(inPlace.pool.keys[layer]!, slot, 1).slice().buffer).map((value) => value + 0.5 * delta);
            copying.writeKVRows(inPlace.pool.keys[layer]!, slot, new Uint8Array(row.buffer));
          }
        },
      });
      const what = `keep ${keep}, discard ${discard}`;
      expect(deltas, what).toEqual(keep > 0 ? [0, -discard, 0, -discard] : [-discard, -discard]);
      for (const [target, source, count] of copying.copies) expect(Math.abs(target - source), what).toBeGreaterThanOrEqual(count);
      for (const layer of [0, 1]) {
        expect(rows(inPlace, layer), what).toEqual(rows(viaHost, layer));
        expect(rows(inPlace, layer, true), what).toEqual(rows(viaHost, layer, true));
      }
    }
  });

  it("copies blocks it shares before writing them, and no longer registers the blocks it rewrote for prefix reuse", () => {
    const p = pool(10);
    const a = p.createSequence(40);
    append(a, ids(1, 12)); // 3 full blocks, registered
    const b = a.fork();
    a.shift(5, 2, plusDelta([]));
    // Block 0 holds only kept tokens and stays shared; the blocks written are a's own copies.
    expect(a.blockTable[0]).toBe(b.blockTable[0]);
    expect(a.blockTable[1]).not.toBe(b.blockTable[1]);
    expect(rows(b, 0)).toEqual(ids(1, 12));
    expect(rows(b, 0, true)).toEqual(ids(1, 12).map((id) => -id));
    expect(rows(a, 0)).toEqual([1, 2, 3, 4, 5, 8 - 1, 9 - 1, 10 - 1, 11 - 1, 12 - 1]);
    // Only the untouched first block is found by a's tokens; blocks a fills later are not registered either.
    append(a, ids(30, 6));
    const found = p.retainCachedPrefix([...a.storedTokens]);
    expect(found).toEqual([a.blockTable[0]]);
    for (const block of found) p.release(block);
    // b's blocks still hold the original prefix.
    const original = p.retainCachedPrefix(ids(1, 12));
    expect(original).toEqual(b.blockTable);
    for (const block of original) p.release(block);
  });

  it("fails without changing anything when the copies of shared blocks do not fit in the pool", () => {
    const p = pool(3);
    const a = p.createSequence(12);
    append(a, ids(1, 12));
    const b = a.fork();
    expect(() => a.shift(1, 2, plusDelta([]))).toThrow(KVBlocksExhaustedError);
    expect(a.length).toBe(12);
    expect(rows(a, 1)).toEqual(ids(1001, 12));
    expect(a.blockTable).toEqual(b.blockTable);
  });
});

describe("paged attention in the model", () => {
  let model: Model;
  beforeAll(async () => {
    model = loadModel(await syntheticModelFile(resolveOptions("tiny", { weightType: "q8_0" })));
  });

  it("one batched forward of sequences at different positions equals each run alone, for f32, f16 and q8_0 KV", () => {
    const vocabulary = model.vocabularySize;
    for (const type of ["f32", "f16", "q8_0"] as const) {
      const pool = model.createKVPool(64, { type, blockTokens: 4 });
      const histories = [tokens(1, 3000), tokens(9, 4000), tokens(23, 5000)];
      const alone = histories.map((history) => {
        const cache = model.createCache(64, { type });
        model.forward(history.subarray(0, -1), cache, { logits: [] });
        return model.forward(history.subarray(-1), cache);
      });
      // The batch: a prefill of the first, decodes of the others after their prefixes.
      const caches = histories.map(() => pool.createSequence(64));
      for (let i = 1; i < histories.length; i++) model.transformer.forward(histories[i]!.subarray(0, -1), caches[i]!, { logits: [] });
      const batched = model.transformer.forwardBatch(histories.map((history, i) => ({ tokens: i === 0 ? history : history.subarray(-1), cache: caches[i]! })));
      for (let i = 0; i < histories.length; i++) {
        expect(batched[i]!.length).toBe(vocabulary);
        expect(batched[i], `${type} sequence ${i}`).toEqual(alone[i]);
      }
      pool.dispose();
    }
  });

  it("gives the same logits whatever the block size, and forked sequences continue independently", () => {
    const history = tokens(21);
    const reference = model.forward(history, model.createCache(40, { type: "f32" }), { logits: "all" });
    const pool = model.createKVPool(40, { type: "f32", blockTokens: 8 });
    const cache = pool.createSequence(40);
    expect(model.forward(history, cache, { logits: "all" })).toEqual(reference);
    const fork = cache.fork();
    const a = model.forward([7], cache);
    const b = model.forward([8], fork);
    const fresh = (last: number) => model.forward(Int32Array.from([...history, last]), model.createCache(40, { type: "f32" }));
    expect(a).toEqual(fresh(7));
    expect(b).toEqual(fresh(8));
  });

  it("rejects a batch over maxBatchTokens, a cache twice, and caches of different pools", () => {
    const pool = model.createKVPool(8);
    const a = pool.createSequence(32);
    expect(() => model.transformer.forwardBatch([{ tokens: tokens(2), cache: a }, { tokens: tokens(1), cache: a }])).toThrow(/twice/);
    expect(() => model.transformer.forwardBatch([{ tokens: tokens(2), cache: a }, { tokens: tokens(1), cache: model.createCache(8) }])).toThrow(/share one KV pool/);
    expect(() => model.transformer.forwardBatch([{ tokens: tokens(600), cache: a }])).toThrow(/exceeds maxBatchTokens/);
  });
});
