import type { Backend, DeviceBuffer, KVLayerView } from "./backend";

/**
 * What a model needs from a KV cache. The model does not own it: the caller creates one per
 * sequence and passes it to every forward. A paged implementation fits the same interface.
 */
export interface KVCache {
  /** Tokens stored and visible (the position of the next token). */
  readonly length: number;
  /** Tokens the cache can hold. */
  readonly capacity: number;
  /** Bytes the cache holds on its backend. */
  readonly bytes: number;
  /**
   * Appends `rows` new tokens' keys and values for `layer` at rows [length, length + rows)
   * and returns the view attention reads (length + rows tokens). keys/values: [rows, kvWidth]
   */
  append(layer: number, keys: DeviceBuffer, values: DeviceBuffer, rows: number): KVLayerView;
  /** After every layer has appended, makes the new rows part of `length`. */
  advance(rows: number): void;
  /** Forgets tokens from `length` on (to rewind or to reuse a shared prefix). */
  trim(length: number): void;
  dispose(): void;
}

export class KVCacheFullError extends Error {
  override readonly name = "KVCacheFullError";
  constructor(needed: number, capacity: number) {
    super(`KV cache full: ${needed} tokens needed, capacity ${capacity}`);
  }
}

/** The simplest cache: one contiguous f32 buffer of `capacity` rows per layer for K and for V. */
export class ContiguousKVCache implements KVCache {
  private readonly keys: DeviceBuffer[] = [];
  private readonly values: DeviceBuffer[] = [];
  private stored = 0;
  private disposed = false;

  constructor(
    private readonly backend: Backend,
    readonly layers: number,
    /** kvHeads * headDim */
    readonly kvWidth: number,
    readonly capacity: number,
  ) {
    for (let layer = 0; layer < layers; layer++) {
      this.keys.push(backend.allocate(capacity * kvWidth)); // [capacity, kvWidth]
      this.values.push(backend.allocate(capacity * kvWidth)); // [capacity, kvWidth]
    }
  }

  get length(): number {
    return this.stored;
  }

  get bytes(): number {
    return this.layers * 2 * this.capacity * this.kvWidth * 4;
  }

  append(layer: number, keys: DeviceBuffer, values: DeviceBuffer, rows: number): KVLayerView {
    const length = this.stored + rows;
    if (length > this.capacity) throw new KVCacheFullError(length, this.capacity);
    this.backend.copy(this.keys[layer]!, this.stored * this.kvWidth, keys, 0, rows * this.kvWidth);
    this.backend.copy(this.values[layer]!, this.stored * this.kvWidth, values, 0, rows * this.kvWidth);
    return { keys: this.keys[layer]!, values: this.values[layer]!, length };
  }

  advance(rows: number): void {
    if (this.stored + rows > this.capacity) throw new KVCacheFullError(this.stored + rows, this.capacity);
    this.stored += rows;
  }

  trim(length: number): void {
    if (length < 0 || length > this.stored) throw new RangeError(`cannot trim a cache of ${this.stored} tokens to ${length}`);
    this.stored = length;
  }

  dispose(): void {
    this.disposed = true;
    this.keys.length = 0;
    this.values.length = 0;
  }

  [Symbol.dispose](): void {
    if (!this.disposed) this.dispose();
  }
}
