/**
 * KV storage memory goes from cache to cache (CpuBackend's HostBufferPool): a forward over a cache
 * of its own, after the last one was disposed, makes no new buffer and faults in no new pages
 * (before, pp512 of the Qwen3-0.6B shape faulted in ~14,300 pages of f16 keys and values every
 * time), and gives the logits of a forward over fresh memory to the bit: attention reads only the
 * rows the cache wrote, whatever the memory held before.
 */
import { loadModel } from "@memra/core";
import { resolveOptions, syntheticModelFile } from "@memra/synthetic";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { KVStorageDisposedError } from "./errors";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

/** The first index where a and b differ in their bits, or -1. */
function firstDifference(a: Float32Array, b: Float32Array): number {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  if (ua.length !== ub.length) return 0;
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

const minorPageFaults = () => process.resourceUsage().minorPageFault;

describe.skipIf(unavailable !== undefined)(`KV memory reused from cache to cache${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let backend: CpuBackend;
  beforeAll(() => {
    backend = CpuBackend.create({ threads: 2 });
  });
  afterAll(() => backend?.dispose());

  it("a storage's memory, given back, is resident for the next storage: writing every row faults in (almost) no pages", () => {
    const rows = 8192;
    const width = 512; // f16 rows of 1 KiB: 8 MiB, 2,048 pages
    const slots = Int32Array.from({ length: rows }, (_, i) => i);
    const source = backend.allocate(rows * width);
    backend.write(source, new Float32Array(rows * width).fill(0.5));
    const write = () => {
      const storage = backend.allocateKV("f16", rows, width);
      const before = minorPageFaults();
      backend.writeKV(storage, slots, source);
      const faults = minorPageFaults() - before;
      storage.dispose!();
      return faults;
    };
    const { allocations } = backend.kvBufferStatistics;
    write(); // fresh memory: up to a fault a page
    const again = [write(), write()];
    for (const faults of again) expect(faults).toBeLessThan(2048 / 8);
    expect(backend.kvBufferStatistics.allocations).toBe(allocations + 1);
  });

  it("a disposed storage is refused (its memory may be another cache's now); dispose is safe twice", () => {
    const storage = backend.allocateKV("f16", 16, 64);
    storage.dispose!();
    storage.dispose!();
    expect(() => backend.writeKV(storage, Int32Array.of(0), backend.allocate(64))).toThrow(KVStorageDisposedError);
    expect(() => backend.readKVRows(storage, 0, 1)).toThrow(KVStorageDisposedError);
  });

  it("forwards over caches of their own, one after another: no new KV buffer after the first, the logits of fresh memory to the bit", async () => {
    const path = await syntheticModelFile(resolveOptions("small", { weightType: "q8_0" }));
    const modelBackend = CpuBackend.create({ threads: 2 });
    const model = loadModel(path, { backend: modelBackend, maxBatchTokens: 128 });
    try {
      const prompt = (seed: number) => Int32Array.from({ length: 100 }, (_, i) => (seed * 7919 + i * 104729) % 60000);
      const run = (tokens: Int32Array, capacity = 128) => {
        const cache = model.createCache(capacity);
        try {
          return model.forward(tokens, cache, { logits: [0, 37, 99] });
        } finally {
          cache.dispose();
        }
      };
      const fresh = run(prompt(1));
      const storages = 2 * model.config.blockCount; // K and V of every layer
      expect(modelBackend.kvBufferStatistics).toMatchObject({ allocations: storages, reuses: 0 });
      const other = run(prompt(2)); // over the first one's rows
      const again = run(prompt(1)); // over the second one's
      const smaller = run(prompt(1), 112); // a smaller cache (at least half the memory): the same buffers
      expect(modelBackend.kvBufferStatistics).toMatchObject({ allocations: storages, reuses: 3 * storages });
      expect(firstDifference(other, fresh)).not.toBe(-1);
      expect(firstDifference(again, fresh)).toBe(-1);
      expect(firstDifference(smaller, fresh)).toBe(-1);
    } finally {
      model.dispose();
    }
    // disposed with the model: nothing kept
    expect(modelBackend.kvBufferStatistics).toMatchObject({ usedBytes: 0, spareBytes: 0 });
  }, 120_000);
});
