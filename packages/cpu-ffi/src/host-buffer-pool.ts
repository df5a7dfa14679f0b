/**
 * HostBufferPool: host memory that KV storage gives back when disposed, handed to a later request
 * instead of a new ArrayBuffer. A new ArrayBuffer is mapped lazily, so the first write to each of
 * its pages is a page fault: a pp512 forward of the Qwen3-0.6B shape over a cache of its own
 * (memra bench, embeddings, rerank, perplexity windows) took ~14,300 faults writing its f16 keys
 * and values (56 MiB), none with the memory of the previous cache.
 *
 * Bounded: the buffers in use plus the spare ones never hold more bytes than were in use at once
 * before (the largest request seen); a new buffer lets go of the oldest spare ones to stay within
 * that. close() lets go of them all.
 */
import { type Pointer, ptr } from "bun:ffi";

/** A buffer of the pool with its pointer (taken once). */
export interface HostBuffer {
  readonly storage: ArrayBuffer;
  readonly pointer: Pointer;
}

export interface HostBufferPoolStatistics {
  /** ArrayBuffers made, since the pool was created. */
  readonly allocations: number;
  /** Requests given a spare buffer instead. */
  readonly reuses: number;
  /** Bytes of the buffers in use. */
  readonly usedBytes: number;
  /** Bytes of the spare buffers. */
  readonly spareBytes: number;
}

export class HostBufferPool {
  /** Oldest first. */
  private readonly spare: HostBuffer[] = [];
  private usedBytes = 0;
  private spareBytes = 0;
  /** The most bytes in use at once. */
  private peakBytes = 0;
  private allocations = 0;
  private reuses = 0;
  private closed = false;

  /**
   * A buffer of at least `bytes` bytes (at least 1): the smallest spare one that is at most twice
   * that, else a new one. A spare buffer holds what its last user wrote.
   */
  take(bytes: number): HostBuffer {
    const size = Math.max(1, bytes);
    let best = -1;
    for (let i = 0; i < this.spare.length; i++) {
      const length = this.spare[i]!.storage.byteLength;
      if (length >= size && length <= 2 * size && (best < 0 || length < this.spare[best]!.storage.byteLength)) best = i;
    }
    if (best >= 0) {
      const [buffer] = this.spare.splice(best, 1);
      this.spareBytes -= buffer!.storage.byteLength;
      this.usedBytes += buffer!.storage.byteLength;
      this.reuses++;
      return buffer!;
    }
    const storage = new ArrayBuffer(size);
    this.allocations++;
    this.usedBytes += size;
    this.peakBytes = Math.max(this.peakBytes, this.usedBytes);
    while (this.spare.length > 0 && this.usedBytes + this.spareBytes > this.peakBytes) this.spareBytes -= this.spare.shift()!.storage.byteLength;
    return { storage, pointer: ptr(storage) };
  }

  /** Takes back a buffer of take(); its last user must not touch it again. After close(), lets go of it. */
  give(buffer: HostBuffer): void {
    this.usedBytes -= buffer.storage.byteLength;
    if (this.closed) return;
    this.spare.push(buffer);
    this.spareBytes += buffer.storage.byteLength;
  }

  get statistics(): HostBufferPoolStatistics {
    return { allocations: this.allocations, reuses: this.reuses, usedBytes: this.usedBytes, spareBytes: this.spareBytes };
  }

  /** Lets go of the spare buffers, and of every buffer given back from now on. Safe twice. */
  close(): void {
    this.closed = true;
    this.spare.length = 0;
    this.spareBytes = 0;
  }
}
