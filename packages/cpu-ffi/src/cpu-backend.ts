/**
 * CpuBackend: the Backend contract on libmemra_cpu. Buffers are host Float32Arrays whose memory
 * the native ops read and write in place (their pointers are taken once, at allocation); weights
 * stay where the caller keeps them, usually the memory-mapped GGUF file (zero copy: the handle
 * holds the file's Uint8Array view, so it cannot be collected while the weight is in use).
 */
import {
  type AttentionShape,
  BACKEND_CONTRACT_VERSION,
  type Backend,
  type BackendOp,
  type DeviceBuffer,
  type KVLayerView,
  type KVStorage,
  type KVType,
  type RopeScaling,
  UnsupportedTensorTypeError,
  type WeightHandle,
  kvRowBytes,
  readHostKVRows,
  writeHostKVRows,
} from "@memra/core";
import { GGMLType, type GGUFTensorInfo, ggmlTypeName } from "@memra/gguf";
import { type Pointer, ptr } from "bun:ffi";
import { BackendDisposedError, KVStorageDisposedError } from "./errors";
import { type HostBuffer, HostBufferPool, type HostBufferPoolStatistics } from "./host-buffer-pool";
import { MEMRA_OPS, type MemraCpuLibrary, NO_WEIGHT_TYPE, openMemraCpuLibrary } from "./native-library";

export interface CpuBackendOptions {
  /** Worker threads, the calling thread included. Default: one per processor online. */
  readonly threads?: number;
  /** The library file to load instead of MEMRA_CPU_LIBRARY / native/build. */
  readonly libraryPath?: string;
  /**
   * A row's results do not depend on how many rows share its op: decoding one token, a
   * speculative verification step and a batched decode step compute each row alike, so
   * speculative decoding and batched serving give exactly the tokens of one-at-a-time decoding
   * (vLLM's VLLM_BATCH_INVARIANT). Decode runs the GEMM kernels for its one row then, 15-30%
   * slower on q8_0. Default: MEMRA_BATCH_INVARIANT=1 in the environment, else off.
   */
  readonly batchInvariant?: boolean;
}

/** An f32 buffer in host memory with a stable pointer. */
class CpuBuffer implements DeviceBuffer {
  readonly data: Float32Array;
  readonly pointer: Pointer;

  constructor(length: number) {
    // An ArrayBuffer of its own (at least one element, so that the pointer is never null).
    const storage = new ArrayBuffer(Math.max(1, length) * 4);
    this.data = new Float32Array(storage, 0, length);
    this.pointer = ptr(storage);
  }

  get length(): number {
    return this.data.length;
  }
}

/** ggml type ids of the KV element types (memra.h). */
const KV_TYPE_IDS: Record<KVType, number> = { f32: 0, f16: 1, q8_0: 8 };

/**
 * KV slots in host memory as the native kernels store them (f32, f16 or q8_0 rows), in a buffer of
 * the backend's pool (dispose() gives it back, for the next cache: see HostBufferPool).
 */
class CpuKVStorage implements KVStorage {
  readonly bytes: Uint8Array;
  readonly pointer: Pointer;
  readonly rowBytes: number;
  disposed = false;

  constructor(
    readonly type: KVType,
    readonly rows: number,
    readonly width: number,
    private readonly buffers: HostBufferPool,
    private readonly buffer: HostBuffer,
  ) {
    this.rowBytes = kvRowBytes(type, width);
    this.bytes = new Uint8Array(buffer.storage, 0, rows * this.rowBytes);
    this.pointer = buffer.pointer;
  }

  prefault(): void {
    // A large ArrayBuffer is mapped lazily; writing it makes every page resident.
    this.bytes.fill(0);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.buffers.give(this.buffer);
  }
}

class CpuWeight implements WeightHandle {
  /** f32 values for a norm weight stored in another type (dequantized on first use). */
  f32Values: { data: Float32Array; pointer: Pointer } | undefined;

  constructor(
    readonly name: string,
    readonly type: GGMLType,
    readonly shape: readonly number[],
    readonly elementCount: number,
    /** The tensor bytes (a view of the file: kept referenced so they stay mapped). */
    readonly bytes: Uint8Array,
    readonly pointer: Pointer,
  ) {}
}

function pointerOf(array: Int32Array | Float32Array): Pointer {
  return ptr(array);
}

export class CpuBackend implements Backend {
  readonly contractVersion = BACKEND_CONTRACT_VERSION;
  readonly name = "cpu";
  private handle: Pointer | null;
  private readonly supportCache = new Map<string, boolean>();
  /** Memory of disposed KV storage, for the next allocateKV. */
  private readonly kvBuffers = new HostBufferPool();

  private constructor(
    readonly library: MemraCpuLibrary,
    handle: Pointer,
  ) {
    this.handle = handle;
  }

  /**
   * Loads the native library (once per process) and creates a context with its thread pool.
   * @throws NativeLibraryUnavailableError when the library is not built or cannot be loaded.
   * @throws NativeError when the context cannot be created.
   */
  static create(options: CpuBackendOptions = {}): CpuBackend {
    const threads = options.threads ?? 0;
    if (!Number.isInteger(threads) || threads < 0) throw new RangeError(`threads must be a non-negative integer, got ${threads}`);
    const library = openMemraCpuLibrary(options.libraryPath);
    const backend = new CpuBackend(library, library.createContext(threads));
    const batchInvariant = options.batchInvariant ?? process.env.MEMRA_BATCH_INVARIANT === "1";
    if (batchInvariant) {
      try {
        library.call("memra_cpu_set_batch_invariant", backend.context(), 1);
      } catch (error) {
        backend.dispose();
        throw error;
      }
    }
    backend.invariant = batchInvariant;
    return backend;
  }

  private invariant = false;

  /** Whether rows compute alike whatever the batch (CpuBackendOptions.batchInvariant). */
  get batchInvariant(): boolean {
    return this.invariant;
  }

  /** Worker threads of this backend's pool, the calling thread included. */
  get threads(): number {
    return this.library.symbols.memra_cpu_thread_count(this.context());
  }

  /** The SIMD path the native dot products use. */
  get isa(): string {
    return this.library.isa;
  }

  supportsOp(op: BackendOp, weightType?: GGMLType): boolean {
    const key = `${op}:${weightType ?? ""}`;
    let supported = this.supportCache.get(key);
    if (supported === undefined) {
      const id = MEMRA_OPS[op];
      supported = id !== undefined && this.library.symbols.memra_cpu_supports(id, weightType ?? NO_WEIGHT_TYPE) === 1;
      this.supportCache.set(key, supported);
    }
    return supported;
  }

  uploadWeight(info: GGUFTensorInfo, data: Uint8Array): WeightHandle {
    if (!this.supportsOp("matmul", info.type) && !this.supportsOp("embedding", info.type)) {
      throw new UnsupportedTensorTypeError(info.name, ggmlTypeName(info.type), this.name);
    }
    if (data.byteLength < info.byteSize) throw new RangeError(`tensor "${info.name}": ${data.byteLength} bytes given, ${info.byteSize} needed`);
    return new CpuWeight(info.name, info.type, info.shape, info.elementCount, data, ptr(data));
  }

  weightBytes(weight: WeightHandle): number {
    return asWeight(weight).bytes.byteLength;
  }

  allocate(length: number): DeviceBuffer {
    if (!Number.isInteger(length) || length < 0) throw new RangeError(`buffer length must be a non-negative integer, got ${length}`);
    return new CpuBuffer(length);
  }

  write(buffer: DeviceBuffer, data: Float32Array, offset = 0): void {
    asBuffer(buffer).data.set(data, offset);
  }

  read(buffer: DeviceBuffer, offset = 0, length = buffer.length - offset): Float32Array {
    return asBuffer(buffer).data.slice(offset, offset + length);
  }

  readInto(buffer: DeviceBuffer, offset: number, length: number, target: Float32Array, targetOffset: number): void {
    target.set(asBuffer(buffer).data.subarray(offset, offset + length), targetOffset);
  }

  copy(out: DeviceBuffer, outOffset: number, source: DeviceBuffer, sourceOffset: number, length: number): void {
    asBuffer(out).data.set(asBuffer(source).data.subarray(sourceOffset, sourceOffset + length), outOffset);
  }

  embedding(out: DeviceBuffer, table: WeightHandle, tokens: Int32Array): void {
    if (tokens.length === 0) return;
    const o = asBuffer(out);
    const t = asWeight(table);
    this.library.call(
      "memra_cpu_embedding",
      this.context(),
      o.pointer,
      o.length,
      t.type,
      t.pointer,
      t.bytes.byteLength,
      t.shape[0]!,
      t.shape[1] ?? 1,
      pointerOf(tokens),
      tokens.length,
    );
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = this.f32Weight(asWeight(weight));
    this.library.call("memra_cpu_rms_norm", this.context(), o.pointer, o.length, input.pointer, input.length, w.pointer, w.data.length, rows, w.data.length, eps);
  }

  matmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = asWeight(weight);
    this.library.call(
      "memra_cpu_matmul",
      this.context(),
      o.pointer,
      o.length,
      input.pointer,
      input.length,
      rows,
      w.type,
      w.pointer,
      w.bytes.byteLength,
      w.shape[0]!,
      w.shape[1] ?? 1,
    );
  }

  expertMatmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, expert: number, rows: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = asWeight(weight);
    this.library.call(
      "memra_cpu_expert_matmul",
      this.context(),
      o.pointer,
      o.length,
      input.pointer,
      input.length,
      rows,
      w.type,
      w.pointer,
      w.bytes.byteLength,
      w.shape[0]!,
      w.shape[1] ?? 1,
      w.shape[2] ?? 1,
      expert,
    );
  }

  ropeNeox(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number): void {
    if (positions.length === 0) return;
    const b = asBuffer(x);
    this.library.call("memra_cpu_rope_neox", this.context(), b.pointer, b.length, pointerOf(positions), positions.length, heads, headDim, freqBase);
  }

  ropeNeoxScaled(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number, scaling: RopeScaling): void {
    if (positions.length === 0) return;
    const b = asBuffer(x);
    const { freqScale, extFactor, magnitude, low, high } = scaling;
    this.library.call("memra_cpu_rope_neox_scaled", this.context(), b.pointer, b.length, pointerOf(positions), positions.length, heads, headDim, freqBase, freqScale, extFactor, magnitude, low, high);
  }

  allocateKV(type: KVType, rows: number, width: number): KVStorage {
    if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`KV rows must be a non-negative integer, got ${rows}`);
    if (!(type in KV_TYPE_IDS)) throw new RangeError(`unknown KV type "${type}" (f32, f16, q8_0)`);
    if (type === "q8_0" && width % 32 !== 0) throw new RangeError(`q8_0 KV rows need a width that is a multiple of 32, got ${width}`);
    return new CpuKVStorage(type, rows, width, this.kvBuffers, this.kvBuffers.take(Math.max(64, rows * kvRowBytes(type, width))));
  }

  /** The host buffers of KV storage: how many were made, reused, in use and spare (see HostBufferPool). */
  get kvBufferStatistics(): HostBufferPoolStatistics {
    return this.kvBuffers.statistics;
  }

  writeKV(storage: KVStorage, slots: Int32Array, source: DeviceBuffer): void {
    if (slots.length === 0) return;
    const kv = asKV(storage);
    const x = asBuffer(source);
    this.library.call(
      "memra_cpu_kv_write",
      this.context(),
      KV_TYPE_IDS[kv.type],
      kv.pointer,
      kv.bytes.byteLength,
      kv.width,
      pointerOf(slots),
      slots.length,
      x.pointer,
      x.length,
    );
  }

  rotateKV(storage: KVStorage, slots: Int32Array, delta: number, heads: number, headDim: number, freqBase: number, scaling?: RopeScaling): void {
    if (slots.length === 0) return;
    const kv = asKV(storage);
    const rope = scaling ? Float32Array.of(scaling.freqScale, scaling.extFactor, scaling.magnitude, scaling.low, scaling.high) : null;
    this.library.call("memra_cpu_kv_rotate", this.context(), KV_TYPE_IDS[kv.type], kv.pointer, kv.bytes.byteLength, heads, headDim, pointerOf(slots), slots.length, delta, freqBase, rope && pointerOf(rope));
  }

  copyKV(storage: KVStorage, targetSlot: number, sourceSlot: number, rows: number): void {
    const kv = asKV(storage);
    if (sourceSlot < 0 || targetSlot < 0 || sourceSlot + rows > kv.rows || targetSlot + rows > kv.rows) throw new RangeError("copyKV outside the storage");
    kv.bytes.copyWithin(targetSlot * kv.rowBytes, sourceSlot * kv.rowBytes, (sourceSlot + rows) * kv.rowBytes);
  }

  readKVRows(storage: KVStorage, firstSlot: number, rows: number): Uint8Array {
    const kv = asKV(storage);
    return readHostKVRows(kv, kv.bytes, firstSlot, rows);
  }

  writeKVRows(storage: KVStorage, firstSlot: number, bytes: Uint8Array): void {
    const kv = asKV(storage);
    writeHostKVRows(kv, kv.bytes, firstSlot, bytes);
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, kv: KVLayerView, shape: AttentionShape): void {
    const o = asBuffer(out);
    const query = asBuffer(q);
    const keys = asKV(kv.keys);
    const values = asKV(kv.values);
    if (keys.type !== values.type || keys.bytes.byteLength !== values.bytes.byteLength) throw new RangeError("attention: keys and values storage differ in type or size");
    // bun:ffi needs a non-empty typed array for a pointer.
    const tables = kv.blockTables.length > 0 ? kv.blockTables : new Int32Array(1);
    this.library.call(
      "memra_cpu_paged_attention",
      this.context(),
      o.pointer,
      o.length,
      query.pointer,
      query.length,
      KV_TYPE_IDS[keys.type],
      keys.pointer,
      values.pointer,
      keys.bytes.byteLength,
      kv.blockTokens,
      pointerOf(tables),
      kv.blockTables.length,
      pointerOf(kv.sequences.length > 0 ? kv.sequences : new Int32Array(4)),
      kv.sequences.length / 4,
      shape.rows,
      shape.heads,
      shape.kvHeads,
      shape.headDim,
      shape.scale,
    );
  }

  swiglu(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, length: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    this.library.call("memra_cpu_swiglu", this.context(), o.pointer, o.length, g.pointer, g.length, u.pointer, u.length, length);
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, length: number): void {
    const o = asBuffer(out);
    const x = asBuffer(a);
    const y = asBuffer(b);
    this.library.call("memra_cpu_add", this.context(), o.pointer, o.length, x.pointer, x.length, y.pointer, y.length, length);
  }

  moeRoute(logits: DeviceBuffer, rows: number, experts: number, k: number): { ids: Int32Array; weights: Float32Array } {
    const ids = new Int32Array(Math.max(1, rows * k)).subarray(0, rows * k);
    const weights = new Float32Array(Math.max(1, rows * k)).subarray(0, rows * k);
    if (rows === 0) return { ids, weights };
    const l = asBuffer(logits);
    this.library.call("memra_cpu_moe_route", this.context(), pointerOf(ids), pointerOf(weights), rows * k, l.pointer, l.length, rows, experts, k);
    return { ids, weights };
  }

  gatherRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, width: number): void {
    if (rows.length === 0) return;
    const o = asBuffer(out);
    const input = asBuffer(x);
    this.library.call("memra_cpu_gather_rows", this.context(), o.pointer, o.length, input.pointer, input.length, pointerOf(rows), rows.length, width);
  }

  scatterAddRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, scales: Float32Array, width: number): void {
    if (rows.length === 0) return;
    if (scales.length < rows.length) throw new RangeError(`scatterAddRows: ${rows.length} rows but ${scales.length} scales`);
    const o = asBuffer(out);
    const input = asBuffer(x);
    this.library.call(
      "memra_cpu_scatter_add_rows",
      this.context(),
      o.pointer,
      o.length,
      input.pointer,
      input.length,
      pointerOf(rows),
      pointerOf(scales),
      rows.length,
      width,
    );
  }

  /** Destroys the native context (its threads and scratch memory) and lets go of spare KV memory. Safe to call twice. */
  dispose(): void {
    if (this.handle === null) return;
    const handle = this.handle;
    this.handle = null;
    this.kvBuffers.close();
    this.library.destroyContext(handle);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  private context(): Pointer {
    if (this.handle === null) throw new BackendDisposedError(this.name);
    return this.handle;
  }

  /** A norm weight as f32: the file's bytes when already f32, else dequantized once. */
  private f32Weight(weight: CpuWeight): { data: { length: number }; pointer: Pointer } {
    if (weight.type === GGMLType.F32) return { data: { length: weight.elementCount }, pointer: weight.pointer };
    if (!weight.f32Values) {
      const data = new Float32Array(weight.elementCount);
      this.library.call("memra_cpu_dequantize", this.context(), ptr(data), data.length, weight.type, weight.pointer, weight.bytes.byteLength, weight.elementCount);
      weight.f32Values = { data, pointer: ptr(data) };
    }
    return weight.f32Values;
  }
}

function asBuffer(buffer: DeviceBuffer): CpuBuffer {
  if (!(buffer instanceof CpuBuffer)) throw new TypeError("the buffer was not allocated by a CpuBackend");
  return buffer;
}

function asKV(storage: KVStorage): CpuKVStorage {
  if (!(storage instanceof CpuKVStorage)) throw new TypeError("the KV storage was not allocated by a CpuBackend");
  // (its memory may hold another cache's rows now)
  if (storage.disposed) throw new KVStorageDisposedError();
  return storage;
}

function asWeight(weight: WeightHandle): CpuWeight {
  if (!(weight instanceof CpuWeight)) throw new TypeError(`weight "${weight.name}" was not uploaded to a CpuBackend`);
  return weight;
}
