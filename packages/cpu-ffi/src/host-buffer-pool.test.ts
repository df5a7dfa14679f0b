import { describe, expect, it } from "vitest";
import { HostBufferPool } from "./host-buffer-pool";

describe("HostBufferPool", () => {
  it("gives a buffer back to the next request of its size, contents as left", () => {
    const pool = new HostBufferPool();
    const first = pool.take(4096);
    new Uint8Array(first.storage).fill(7);
    pool.give(first);
    const second = pool.take(4096);
    expect(second.storage).toBe(first.storage);
    expect(second.pointer).toBe(first.pointer);
    expect(new Uint8Array(second.storage)[4095]).toBe(7);
    expect(pool.statistics).toEqual({ allocations: 1, reuses: 1, usedBytes: 4096, spareBytes: 0 });
  });

  it("takes the smallest spare buffer that holds the request, at most twice its size", () => {
    const pool = new HostBufferPool();
    const [small, large, middle] = [pool.take(100), pool.take(300), pool.take(150)];
    for (const buffer of [small, large, middle]) pool.give(buffer);
    expect(pool.take(120).storage).toBe(middle.storage);
    expect(pool.take(50).storage).toBe(small.storage);
    // 300 bytes for 140 would keep more than twice the request in use: a new buffer instead
    const fresh = pool.take(140);
    expect(fresh.storage).not.toBe(large.storage);
    expect(fresh.storage.byteLength).toBe(140);
    expect(pool.statistics.allocations).toBe(4);
  });

  it("never holds more than the most bytes in use at once: a new buffer lets go of the oldest spare ones", () => {
    const pool = new HostBufferPool();
    const a = pool.take(1000);
    const b = pool.take(1000);
    pool.give(a);
    pool.give(b);
    expect(pool.statistics).toMatchObject({ usedBytes: 0, spareBytes: 2000 });
    // 3000 new bytes: in use 3000 is the new most; the 2000 spare would be 5000 held
    const c = pool.take(3000);
    expect(pool.statistics).toMatchObject({ usedBytes: 3000, spareBytes: 0 });
    pool.give(c);
    // 500 new bytes (3000 spare is more than twice that): 500 + 3000 > 3000, the old one goes
    pool.take(500);
    expect(pool.statistics).toMatchObject({ usedBytes: 500, spareBytes: 0 });
  });

  it("close() lets go of the spare buffers and of those given back later; safe twice", () => {
    const pool = new HostBufferPool();
    const a = pool.take(64);
    const b = pool.take(64);
    pool.give(a);
    pool.close();
    pool.close();
    expect(pool.statistics.spareBytes).toBe(0);
    pool.give(b);
    expect(pool.statistics).toMatchObject({ usedBytes: 0, spareBytes: 0 });
    expect(pool.take(64).storage).not.toBe(b.storage);
  });
});
