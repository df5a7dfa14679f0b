/**
 * CudaBackend: the Backend contract on libmemra_cuda. Buffers, weights and KV storage live in
 * device memory (the context's caching allocator); write/read copy through pinned staging; ops are
 * queued on the context's stream and run asynchronously until a read (or moeRoute) waits for them.
 * Small index arrays (tokens, positions, slots, block tables) are passed from the host: the library
 * checks them and stages them to the device. captureGraph records ops as a CUDA graph: the index
 * arrays they were given become its inputs, re-read on every replay.
 */
import {
  type AttentionShape,
  BACKEND_CONTRACT_VERSION,
  type Backend,
  type BackendGraph,
  type BackendOp,
  type DeviceBuffer,
  type KVLayerView,
  type KVStorage,
  KVStorageDisposedError,
  type KVType,
  type RopeScaling,
  type ResidualNorm,
  UnsupportedTensorTypeError,
  type WeightHandle,
  kvRowBytes,
  kvRowRange,
  kvRowsOf,
} from "@memra/core";
import { GGMLType, type GGUFTensorInfo, ggmlTypeName } from "@memra/gguf";
import { type Pointer, ptr } from "bun:ffi";
import { CudaBackendDisposedError } from "./errors";
import { CUDA_NO_WEIGHT_TYPE, MEMRA_CUDA_OPS, type MemraCudaLibrary, type MemraCudaSymbols, openMemraCudaLibrary } from "./native-library";

/** The arguments of memra_cuda_paged_attention after the context. */
type AttentionArguments = Parameters<MemraCudaSymbols["memra_cuda_paged_attention"]> extends [unknown, ...infer Rest] ? Rest : never;

export interface CudaBackendOptions {
  /** CUDA device index. Default 0. */
  readonly device?: number;
  /** The library file to load instead of MEMRA_CUDA_LIBRARY / native/build. */
  readonly libraryPath?: string;
  /**
   * Prefill matmuls (9 rows and more) on the f16 tensor-core GEMM (true, the default unless
   * MEMRA_CUDA_GEMM=0) or on the f32 matrix-vector kernel (false: slower, and within llama.cpp's
   * CPU results by the golden suite's bounds; the GEMM rounds activations and weights to f16).
   */
  readonly tensorCoreGemm?: boolean;
  /**
   * Round activations as ggml's CPU matmul does for the weight type before quantized, f16 and
   * bf16 matmuls (true, the default unless MEMRA_CUDA_ACTIVATION_ROUNDING=0), or multiply them
   * exactly in f32 (false).
   */
  readonly activationRounding?: boolean;
  /**
   * Record decode steps as CUDA graphs (captureGraph; true, the default unless MEMRA_CUDA_GRAPHS=0)
   * or run every op as its own launch (false: the backend has no captureGraph).
   */
  readonly graphs?: boolean;
  /**
   * Apply QK-norm and RoPE and write a decode step's K/V in the attention kernel
   * (qkNormRopeAttentionMatmul: one launch fewer per layer; true, the default unless
   * MEMRA_CUDA_FUSED_ATTENTION=0) or in a launch of their own before it (false: that op declines).
   */
  readonly fusedAttention?: boolean;
  /**
   * Round a decode step's SwiGLU for the down projection in the gate/up matrix-vector kernel
   * (rmsNormSwigluMatmul: one launch fewer per layer; true, or MEMRA_CUDA_FUSED_FFN=1) or in a
   * launch of its own (false: that op declines; the default, as the H200 ran a Qwen3-0.6B decode
   * step 20% faster so: the groups' tickets cost more than the launch).
   */
  readonly fusedFeedForward?: boolean;
  /**
   * Add a decode step's O and down projections to the residual stream and apply the next RMSNorm
   * (with its q8_0 rounding) in the last block of the projection's matrix-vector kernel, where the
   * model offers it (a ResidualNorm: attentionMatmul, qkNormRopeAttentionMatmul,
   * rmsNormSwigluMatmul; q8_0 projections of 1 or 2 rows): two launches fewer per layer (true, or
   * MEMRA_CUDA_FUSED_NORM=1), or the norm in the next op's launch (false, the default: the tail is
   * one block's work after a ticket over the launch's blocks, and the H200 ran a Qwen3-0.6B decode
   * step 12% faster without it).
   */
  readonly fusedNorm?: boolean;
  /**
   * Rewrite q8_0 matrices whose rows are a multiple of 256 values and q6_K ones of 2,048, once on
   * upload, into a layout of the same size whose codes are 8- and 16-byte aligned (each 8 blocks'
   * scales, then their codes: memra_cuda_repack), so that the kernels read them with wide loads
   * where the file's blocks (34 and 210 bytes) take 2-byte ones (true, the default unless
   * MEMRA_CUDA_REPACK=0). Results are the same bit for bit either way.
   */
  readonly repackWeights?: boolean;
}

/** An f32 buffer in device memory. */
class CudaBuffer implements DeviceBuffer {
  constructor(
    /** Device address. */
    readonly pointer: number,
    readonly length: number,
  ) {}
}

const KV_TYPE_IDS: Record<KVType, number> = { f32: 0, f16: 1, q8_0: 8 };

class CudaKVStorage implements KVStorage {
  readonly rowBytes: number;
  disposed = false;
  constructor(
    readonly type: KVType,
    readonly rows: number,
    readonly width: number,
    /** Device address of rows * rowBytes bytes. */
    readonly pointer: number,
    /** Gives the device memory back to the backend's caching allocator. */
    private readonly release: (pointer: number) => void,
  ) {
    this.rowBytes = kvRowBytes(type, width);
  }
  get bytes(): number {
    return this.rows * this.rowBytes;
  }
  /**
   * The device memory back to the context's caching allocator (stream-ordered: a later allocation
   * gets it only for ops queued after every op that used it), not held until the backend is disposed.
   * Graphs recorded over this storage are never replayed again: the model keys them by storage.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.release(this.pointer);
  }
}

class CudaWeight implements WeightHandle {
  /** f32 copy of a norm weight stored in another type (dequantized on the device on first use). */
  f32Pointer: number | undefined;
  constructor(
    readonly name: string,
    /** The file's type. */
    readonly type: GGMLType,
    readonly shape: readonly number[],
    readonly elementCount: number,
    readonly byteLength: number,
    /** Device address. */
    readonly pointer: number,
    /** The type the library's calls are given: `type`, or its repacked layout's (memra_cuda_repacked_type_of). */
    readonly kernelType: number = type,
  ) {}
}

type HostArray = Int32Array | Float32Array;

/**
 * A CUDA graph of this backend's ops: its inputs are the host arrays the recorded ops were given,
 * in the library's input order; replay passes their current addresses and sizes.
 */
class CudaGraph implements BackendGraph {
  private readonly addresses: BigUint64Array;
  private readonly sizes: BigInt64Array;

  constructor(
    private readonly backend: CudaBackend,
    private handle: Pointer | null,
    /** The arrays each replay reads, in input order. */
    readonly inputs: readonly HostArray[],
    /** Kernel and copy nodes. */
    readonly nodes: number,
    /** Device workspace the graph keeps. */
    readonly workspaceBytes: number,
  ) {
    this.addresses = new BigUint64Array(Math.max(1, inputs.length));
    this.sizes = new BigInt64Array(Math.max(1, inputs.length));
    inputs.forEach((array, i) => (this.sizes[i] = BigInt(array.byteLength)));
  }

  replay(): void {
    if (this.handle === null) throw new Error("replay of a disposed CUDA graph");
    for (let i = 0; i < this.inputs.length; i++) this.addresses[i] = BigInt(ptr(this.inputs[i]!));
    this.backend.library.call("memra_cuda_graph_replay", this.backend.contextHandle(), this.handle, ptr(this.addresses), ptr(this.sizes), this.inputs.length);
  }

  dispose(): void {
    if (this.handle === null) return;
    const handle = this.handle;
    this.handle = null;
    this.backend.forgetGraph(this);
    if (!this.backend.disposed) this.backend.library.call("memra_cuda_graph_destroy", this.backend.contextHandle(), handle);
  }

  /** The context was destroyed (and the graph with it). */
  detach(): void {
    this.handle = null;
  }
}

export class CudaBackend implements Backend {
  readonly contractVersion = BACKEND_CONTRACT_VERSION;
  readonly name = "cuda";
  private handle: Pointer | null;
  private readonly supportCache = new Map<string, boolean>();
  /** While capturing: every host array passed to the library, by address. */
  private captured: Map<string, HostArray> | undefined;
  private readonly liveGraphs = new Set<CudaGraph>();
  /** The host arrays memra_cuda_matmul_shared reads (copied by the call; reused). */
  /** memra_cuda_residual_norm, filled for each op given one (the library reads it during the call). */
  private readonly residualNorm = new DataView(new ArrayBuffer(56));
  private readonly groupArguments = {
    outs: new BigUint64Array(8),
    outLengths: new BigInt64Array(8),
    types: new Int32Array(8),
    weights: new BigUint64Array(8),
    weightBytes: new BigInt64Array(8),
    nOuts: new BigInt64Array(8),
    nIn: 0,
  };
  /** Records ops as a CUDA graph (Backend.captureGraph); absent when graphs are off (CudaBackendOptions.graphs). */
  readonly captureGraph?: (record: () => void) => BackendGraph;

  private constructor(
    readonly library: MemraCudaLibrary,
    handle: Pointer,
    /** The CUDA device index. */
    readonly device: number,
    /** Whether captureGraph records (CudaBackendOptions.graphs). */
    readonly graphs: boolean,
    /** Whether qkNormRopeAttentionMatmul runs (CudaBackendOptions.fusedAttention). */
    readonly fusedAttention: boolean,
    /** Whether rmsNormSwigluMatmul runs (CudaBackendOptions.fusedFeedForward). */
    readonly fusedFeedForward: boolean,
    /** Whether projections take a ResidualNorm (CudaBackendOptions.fusedNorm). */
    readonly fusedNorm: boolean,
    /** Whether q8_0 weights are repacked on upload (CudaBackendOptions.repackWeights). */
    readonly repackWeights: boolean,
  ) {
    this.handle = handle;
    if (graphs) this.captureGraph = (record) => this.capture(record);
  }

  /**
   * Loads libmemra_cuda (once per process) and creates a context on the device.
   * @throws CudaUnavailableError when the library is not built, or there is no driver, GPU or such device (with the driver's message).
   */
  static create(options: CudaBackendOptions = {}): CudaBackend {
    const device = options.device ?? 0;
    if (!Number.isInteger(device) || device < 0) throw new RangeError(`device must be a non-negative integer, got ${device}`);
    const library = openMemraCudaLibrary(options.libraryPath);
    const context = library.createContext(device);
    const setting = (value: boolean | undefined) => (value === undefined ? -1 : value ? 1 : 0);
    if (options.tensorCoreGemm !== undefined || options.activationRounding !== undefined) {
      try {
        library.call("memra_cuda_configure", context, setting(options.tensorCoreGemm), setting(options.activationRounding));
      } catch (error) {
        library.symbols.memra_cuda_destroy(context);
        throw error;
      }
    }
    const graphs = options.graphs ?? process.env.MEMRA_CUDA_GRAPHS !== "0";
    const fusedAttention = options.fusedAttention ?? process.env.MEMRA_CUDA_FUSED_ATTENTION !== "0";
    // Off by default (MEMRA_CUDA_FUSED_FFN=1 / MEMRA_CUDA_FUSED_NORM=1 turn them on): on the H200
    // a Qwen3-0.6B decode step was 20% (SwiGLU) and 12% (norms) faster with them in launches of
    // their own (bench/device/run.sh's variants, 2026-12-04)
    const fusedFeedForward = options.fusedFeedForward ?? process.env.MEMRA_CUDA_FUSED_FFN === "1";
    const fusedNorm = options.fusedNorm ?? process.env.MEMRA_CUDA_FUSED_NORM === "1";
    const repackWeights = options.repackWeights ?? process.env.MEMRA_CUDA_REPACK !== "0";
    return new CudaBackend(library, context, device, graphs, fusedAttention, fusedFeedForward, fusedNorm, repackWeights);
  }

  /**
   * The device's name, compute capability (e.g. 90) and multiprocessor count, and whether kernels
   * launch with programmatic dependent launch (sm_90+, unless MEMRA_CUDA_PDL=0).
   */
  deviceInfo(): { name: string; computeCapability: number; multiprocessors: number; programmaticLaunch: boolean } {
    const name = new Uint8Array(256);
    const numbers = new Int32Array(2);
    this.library.call("memra_cuda_device_info", this.context(), ptr(name), name.length, ptr(numbers), ptr(numbers, 4));
    const end = name.indexOf(0);
    return {
      name: new TextDecoder().decode(name.subarray(0, end < 0 ? name.length : end)),
      computeCapability: numbers[0]!,
      multiprocessors: numbers[1]!,
      programmaticLaunch: this.library.symbols.memra_cuda_programmatic_launch() === 1,
    };
  }

  /**
   * The GPU time of each kernel `run` launches, in launch order: a CUDA event is recorded after every
   * launch (eager ops only: nothing inside a graph replay or capture), after a kernel that first
   * holds the stream `holdMicroseconds` (default 50,000) so that the host can queue run's launches
   * before the GPU starts them. A launch's time is the GPU's from the end of the kernel before it to
   * its own end: its run plus the gap between the two (the host's launch cost only where the hold
   * ran out). At most `capacity` launches (default 65,536; more: an error). Kernel names are those
   * of the launchers' checks (e.g. matrix_vector_q8_0_kernel).
   */
  profileKernels(run: () => void, options: { holdMicroseconds?: number; capacity?: number } = {}): { kernel: string; microseconds: number }[] {
    const capacity = options.capacity ?? 65_536;
    this.library.call("memra_cuda_profile_begin", this.context(), capacity, options.holdMicroseconds ?? 50_000);
    const names = new Uint8Array(capacity * 48 + 1);
    const microseconds = new Float32Array(capacity);
    const count = new BigInt64Array(1);
    try {
      run();
    } finally {
      this.library.call("memra_cuda_profile_end", this.context(), ptr(names), names.length, ptr(microseconds), capacity, ptr(count));
    }
    const end = names.indexOf(0);
    const kernels = new TextDecoder().decode(names.subarray(0, end < 0 ? names.length : end)).split("\n");
    return Array.from({ length: Number(count[0]) }, (_, i) => ({ kernel: kernels[i]!, microseconds: microseconds[i]! }));
  }

  /** Free and total device memory, and the bytes the allocator keeps cached. */
  memoryInfo(): { freeBytes: number; totalBytes: number; cachedBytes: number } {
    const values = new BigInt64Array(3);
    this.library.call("memra_cuda_memory_info", this.context(), ptr(values), ptr(values, 8), ptr(values, 16));
    return { freeBytes: Number(values[0]), totalBytes: Number(values[1]), cachedBytes: Number(values[2]) };
  }

  /** Waits for every queued op (reports a kernel fault as a CudaError). */
  synchronize(): void {
    this.library.call("memra_cuda_synchronize", this.context());
  }

  supportsOp(op: BackendOp, weightType?: GGMLType): boolean {
    const key = `${op}:${weightType ?? ""}`;
    let supported = this.supportCache.get(key);
    if (supported === undefined) {
      const id = MEMRA_CUDA_OPS[op];
      supported = id !== undefined && this.library.symbols.memra_cuda_supports(id, weightType ?? CUDA_NO_WEIGHT_TYPE) === 1;
      this.supportCache.set(key, supported);
    }
    return supported;
  }

  uploadWeight(info: GGUFTensorInfo, data: Uint8Array): WeightHandle {
    if (!this.supportsOp("matmul", info.type) && !this.supportsOp("embedding", info.type)) {
      throw new UnsupportedTensorTypeError(info.name, ggmlTypeName(info.type), this.name);
    }
    if (data.byteLength < info.byteSize) throw new RangeError(`tensor "${info.name}": ${data.byteLength} bytes given, ${info.byteSize} needed`);
    const pointer = this.deviceAlloc(info.byteSize);
    // Matrices whose rows have an aligned layout (q8_0 of 256k values, q6_K of 2,048k): rewritten in place.
    const width = info.shape[0] ?? 0;
    const repacked = this.repackWeights && info.shape.length >= 2 && info.elementCount > 0 ? this.library.symbols.memra_cuda_repacked_type_of(info.type, width) : info.type;
    try {
      if (info.byteSize > 0) this.library.call("memra_cuda_upload", this.context(), pointer as Pointer, ptr(data), info.byteSize);
      if (repacked !== info.type) this.library.call("memra_cuda_repack", this.context(), info.type, pointer as Pointer, info.byteSize, info.elementCount / width, width);
    } catch (error) {
      this.library.symbols.memra_cuda_free(this.context(), pointer as Pointer); // the context's memory back, not held until dispose
      throw error;
    }
    const weight = new CudaWeight(info.name, info.type, info.shape, info.elementCount, info.byteSize, pointer, repacked);
    // A half-precision norm weight gets its f32 copy now, not on first use (which may be while recording a graph).
    if (info.shape.length === 1 && (info.type === GGMLType.F16 || info.type === GGMLType.BF16)) this.f32Weight(weight);
    return weight;
  }

  weightBytes(weight: WeightHandle): number {
    return asWeight(weight).byteLength;
  }

  allocate(length: number): DeviceBuffer {
    if (!Number.isInteger(length) || length < 0) throw new RangeError(`buffer length must be a non-negative integer, got ${length}`);
    return new CudaBuffer(this.deviceAlloc(Math.max(1, length) * 4), length);
  }

  write(buffer: DeviceBuffer, data: Float32Array, offset = 0): void {
    const b = asBuffer(buffer);
    if (offset < 0 || offset + data.length > b.length) throw new RangeError(`write of ${data.length} values at ${offset} outside a buffer of ${b.length}`);
    if (data.length === 0) return;
    this.library.call("memra_cuda_upload", this.context(), (b.pointer + offset * 4) as Pointer, ptr(data), data.byteLength);
  }

  read(buffer: DeviceBuffer, offset = 0, length = buffer.length - offset): Float32Array {
    const b = asBuffer(buffer);
    if (offset < 0 || length < 0 || offset + length > b.length) throw new RangeError(`read of ${length} values at ${offset} outside a buffer of ${b.length}`);
    const out = new Float32Array(length);
    if (length > 0) this.library.call("memra_cuda_download", this.context(), ptr(out), (b.pointer + offset * 4) as Pointer, length * 4);
    return out;
  }

  readInto(buffer: DeviceBuffer, offset: number, length: number, target: Float32Array, targetOffset: number): void {
    const b = asBuffer(buffer);
    if (offset < 0 || length < 0 || offset + length > b.length) throw new RangeError(`read of ${length} values at ${offset} outside a buffer of ${b.length}`);
    if (targetOffset < 0 || targetOffset + length > target.length) throw new RangeError(`read of ${length} values into ${targetOffset} of an array of ${target.length}`);
    if (length > 0) this.library.call("memra_cuda_download", this.context(), ptr(target, targetOffset * 4), (b.pointer + offset * 4) as Pointer, length * 4);
  }

  argmaxRows(out: Int32Array, logits: DeviceBuffer, rows: number, columns: number): void {
    if (out.length < rows) throw new RangeError(`argmax of ${rows} rows into an array of ${out.length}`);
    if (rows === 0) return;
    const l = asBuffer(logits);
    this.library.call("memra_cuda_argmax_rows", this.context(), ptr(out), out.length, l.pointer as Pointer, l.length, rows, columns);
  }

  topKRows(ids: Int32Array, values: Float32Array, logits: DeviceBuffer, rows: number, columns: number, k: number): void {
    if (ids.length < rows * k || values.length < rows * k) throw new RangeError(`top-${k} of ${rows} rows into arrays of ${ids.length} ids and ${values.length} values`);
    if (rows === 0) {
      // nothing to pick (and no pointer to take of empty arrays): the library's check of k alone
      if (!Number.isInteger(k) || k < 1 || k > Math.min(columns, 1024)) throw new RangeError(`k ${k}: the top-k of rows of ${columns} values takes 1..${Math.min(columns, 1024)} of them`);
      return;
    }
    const l = asBuffer(logits);
    this.library.call("memra_cuda_top_k_rows", this.context(), ptr(ids), ids.length, ptr(values), values.length, l.pointer as Pointer, l.length, rows, columns, k);
  }

  logSoftmaxAt(out: Float32Array, logits: DeviceBuffer, rows: number, columns: number, targets: Int32Array): void {
    if (out.length < rows || targets.length < rows) throw new RangeError(`log-probabilities of ${rows} rows into ${out.length} values from ${targets.length} targets`);
    if (rows === 0) return;
    const l = asBuffer(logits);
    this.library.call("memra_cuda_log_softmax_at", this.context(), ptr(out), out.length, l.pointer as Pointer, l.length, rows, columns, ptr(targets), targets.length);
  }

  copy(out: DeviceBuffer, outOffset: number, source: DeviceBuffer, sourceOffset: number, length: number): void {
    const o = asBuffer(out);
    const s = asBuffer(source);
    if (outOffset < 0 || sourceOffset < 0 || length < 0 || outOffset + length > o.length || sourceOffset + length > s.length) throw new RangeError("copy outside a buffer");
    if (length === 0) return;
    this.library.call("memra_cuda_copy", this.context(), (o.pointer + outOffset * 4) as Pointer, (s.pointer + sourceOffset * 4) as Pointer, length * 4);
  }

  embedding(out: DeviceBuffer, table: WeightHandle, tokens: Int32Array): void {
    if (tokens.length === 0) return;
    const o = asBuffer(out);
    const t = asWeight(table);
    this.library.call(
      "memra_cuda_embedding",
      this.context(),
      o.pointer as Pointer,
      o.length,
      t.kernelType,
      t.pointer as Pointer,
      t.byteLength,
      t.shape[0]!,
      t.shape[1] ?? 1,
      this.hostPointer(tokens),
      tokens.length,
    );
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = asWeight(weight);
    const pointer = this.f32Weight(w);
    this.library.call("memra_cuda_rms_norm", this.context(), o.pointer as Pointer, o.length, input.pointer as Pointer, input.length, pointer as Pointer, w.elementCount, rows, w.elementCount, eps);
  }

  addRmsNorm(out: DeviceBuffer, hidden: DeviceBuffer, delta: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void {
    const o = asBuffer(out);
    const h = asBuffer(hidden);
    const d = asBuffer(delta);
    const w = asWeight(weight);
    this.library.call(
      "memra_cuda_add_rms_norm",
      this.context(),
      o.pointer as Pointer,
      o.length,
      h.pointer as Pointer,
      h.length,
      d.pointer as Pointer,
      d.length,
      this.f32Weight(w) as Pointer,
      w.elementCount,
      rows,
      w.elementCount,
      eps,
    );
  }

  matmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = asWeight(weight);
    this.library.call(
      "memra_cuda_matmul",
      this.context(),
      o.pointer as Pointer,
      o.length,
      input.pointer as Pointer,
      input.length,
      rows,
      w.kernelType,
      w.pointer as Pointer,
      w.byteLength,
      w.shape[0]!,
      w.shape[1] ?? 1,
    );
  }

  swigluMatmul(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, weight: WeightHandle, rows: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    const w = asWeight(weight);
    this.library.call(
      "memra_cuda_swiglu_matmul",
      this.context(),
      o.pointer as Pointer,
      o.length,
      g.pointer as Pointer,
      g.length,
      u.pointer as Pointer,
      u.length,
      rows,
      w.kernelType,
      w.pointer as Pointer,
      w.byteLength,
      w.shape[0]!,
      w.shape[1] ?? 1,
    );
  }

  matmuls(outs: readonly DeviceBuffer[], x: DeviceBuffer, weights: readonly WeightHandle[], rows: number): void {
    const count = this.groupArgumentsOf("matmuls", outs, weights);
    if (count === 0) return;
    const input = asBuffer(x);
    const a = this.groupArguments;
    this.library.call(
      "memra_cuda_matmul_shared",
      this.context(),
      count,
      ptr(a.outs),
      ptr(a.outLengths),
      input.pointer as Pointer,
      input.length,
      rows,
      ptr(a.types),
      ptr(a.weights),
      ptr(a.weightBytes),
      a.nIn,
      ptr(a.nOuts),
    );
  }

  rmsNormMatmuls(
    normed: DeviceBuffer,
    hidden: DeviceBuffer,
    delta: DeviceBuffer | undefined,
    normWeight: WeightHandle,
    eps: number,
    outs: readonly DeviceBuffer[],
    weights: readonly WeightHandle[],
    rows: number,
  ): void {
    const count = this.groupArgumentsOf("rmsNormMatmuls", outs, weights);
    if (count === 0) throw new RangeError("rmsNormMatmuls: no weights");
    const a = this.groupArguments;
    this.library.call(
      "memra_cuda_norm_matmul_shared",
      this.context(),
      ...this.normArguments(normed, hidden, delta, normWeight, eps),
      count,
      ptr(a.outs),
      ptr(a.outLengths),
      rows,
      ptr(a.types),
      ptr(a.weights),
      ptr(a.weightBytes),
      a.nIn,
      ptr(a.nOuts),
    );
  }

  /**
   * The norm's arguments of memra_cuda_norm_matmul_shared and memra_cuda_norm_swiglu_matmul
   * (normed … eps: normed, hidden, the optional delta and the f32 norm weight, with their lengths).
   */
  private normArguments(normed: DeviceBuffer, hidden: DeviceBuffer, delta: DeviceBuffer | undefined, normWeight: WeightHandle, eps: number) {
    const [n, h] = [asBuffer(normed), asBuffer(hidden)];
    const d = delta === undefined ? undefined : asBuffer(delta);
    const w = asWeight(normWeight);
    return [
      n.pointer as Pointer,
      n.length,
      h.pointer as Pointer,
      h.length,
      (d?.pointer ?? null) as Pointer,
      d?.length ?? 0,
      this.f32Weight(w) as Pointer,
      w.elementCount,
      eps,
    ] as const;
  }

  /**
   * rmsNormMatmuls with gate and up, then swigluMatmul into projected, with the down projection's
   * q8_0 rounding of silu(gate) · up done by the gate/up kernel (memra_cuda_norm_swiglu_matmul).
   * Declines (false, nothing done) where that kernel does not apply: gate or up not q8_0, more than 8
   * rows, a down projection that does not read q8_0 codes, fusedFeedForward off.
   */
  rmsNormSwigluMatmul(
    normed: DeviceBuffer,
    hidden: DeviceBuffer,
    delta: DeviceBuffer | undefined,
    normWeight: WeightHandle,
    eps: number,
    gate: DeviceBuffer,
    up: DeviceBuffer,
    gateWeight: WeightHandle,
    upWeight: WeightHandle,
    projected: DeviceBuffer,
    downWeight: WeightHandle,
    rows: number,
    residual?: ResidualNorm,
  ): boolean | "normed" {
    const op = "rmsNormSwigluMatmul";
    if (!this.fusedFeedForward) return false;
    const [g, u, down] = [asWeight(gateWeight), asWeight(upWeight), asWeight(downWeight)];
    const ffn = g.shape[1] ?? 1;
    if ((u.shape[1] ?? 1) !== ffn || down.shape[0] !== ffn) throw new RangeError(`${op}: gate, up and down weights of ${ffn}, ${u.shape[1] ?? 1} and ${down.shape[0]} features`);
    if (this.library.symbols.memra_cuda_norm_swiglu_matmul_applies(this.context(), rows, g.kernelType, u.kernelType, g.shape[0]!, ffn, down.kernelType, down.shape[1] ?? 1) !== 1) return false;
    this.groupArgumentsOf(op, [gate, up], [gateWeight, upWeight]);
    const then = this.residualArgument(residual, down, rows);
    const p = asBuffer(projected);
    const a = this.groupArguments;
    this.library.call(
      "memra_cuda_norm_swiglu_matmul",
      this.context(),
      ...this.normArguments(normed, hidden, delta, normWeight, eps),
      ptr(a.outs),
      ptr(a.outLengths),
      rows,
      ptr(a.types),
      ptr(a.weights),
      ptr(a.weightBytes),
      a.nIn,
      ffn,
      p.pointer as Pointer,
      p.length,
      down.kernelType,
      down.pointer as Pointer,
      down.byteLength,
      down.shape[1] ?? 1,
      then,
    );
    return then === null ? true : "normed";
  }

  /** Fills groupArguments for a group of weights of one input; returns their count. */
  private groupArgumentsOf(op: string, outs: readonly DeviceBuffer[], weights: readonly WeightHandle[]): number {
    const count = outs.length;
    if (count !== weights.length) throw new RangeError(`${op}: ${count} outputs for ${weights.length} weights`);
    if (count > 8) throw new RangeError(`${op}: ${count} weights (at most 8)`);
    const a = this.groupArguments;
    for (let i = 0; i < count; i++) {
      const o = asBuffer(outs[i]!);
      const w = asWeight(weights[i]!);
      if (i === 0) a.nIn = w.shape[0]!;
      else if (w.shape[0] !== a.nIn) throw new RangeError(`${op}: weight "${w.name}" takes ${w.shape[0]} inputs, "${weights[0]!.name}" ${a.nIn}`);
      a.outs[i] = BigInt(o.pointer);
      a.outLengths[i] = BigInt(o.length);
      a.types[i] = w.kernelType;
      a.weights[i] = BigInt(w.pointer);
      a.weightBytes[i] = BigInt(w.byteLength);
      a.nOuts[i] = BigInt(w.shape[1] ?? 1);
    }
    return count;
  }

  expertMatmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, expert: number, rows: number): void {
    const o = asBuffer(out);
    const input = asBuffer(x);
    const w = asWeight(weight);
    this.library.call(
      "memra_cuda_expert_matmul",
      this.context(),
      o.pointer as Pointer,
      o.length,
      input.pointer as Pointer,
      input.length,
      rows,
      w.kernelType,
      w.pointer as Pointer,
      w.byteLength,
      w.shape[0]!,
      w.shape[1] ?? 1,
      w.shape[2] ?? 1,
      expert,
    );
  }

  ropeNeox(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number): void {
    if (positions.length === 0) return;
    const b = asBuffer(x);
    this.library.call("memra_cuda_rope_neox", this.context(), b.pointer as Pointer, b.length, this.hostPointer(positions), positions.length, heads, headDim, freqBase);
  }

  ropeNeoxScaled(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number, scaling: RopeScaling): void {
    if (positions.length === 0) return;
    const b = asBuffer(x);
    const { freqScale, extFactor, magnitude, low, high } = scaling;
    this.library.call("memra_cuda_rope_neox_scaled", this.context(), b.pointer as Pointer, b.length, this.hostPointer(positions), positions.length, heads, headDim, freqBase, freqScale, extFactor, magnitude, low, high);
  }

  qkNormRope(
    q: DeviceBuffer,
    k: DeviceBuffer,
    qNorm: WeightHandle,
    kNorm: WeightHandle,
    positions: Int32Array,
    heads: number,
    kvHeads: number,
    headDim: number,
    eps: number,
    freqBase: number,
    scaling?: RopeScaling,
  ): boolean {
    if (headDim >= 256 || headDim % 2 !== 0) return false; // one warp per head: the ops one by one
    const [qWeight, kWeight] = this.qkNormWeights("qkNormRope", qNorm, kNorm, headDim);
    if (positions.length === 0) return true;
    const qb = asBuffer(q);
    const kb = asBuffer(k);
    const rope = ropeScalingValues(scaling);
    this.library.call(
      "memra_cuda_qk_norm_rope",
      this.context(),
      qb.pointer as Pointer,
      qb.length,
      kb.pointer as Pointer,
      kb.length,
      qWeight,
      kWeight,
      headDim,
      this.hostPointer(positions),
      positions.length,
      heads,
      kvHeads,
      headDim,
      eps,
      freqBase,
      rope && ptr(rope),
    );
    return true;
  }

  /** The f32 copies of the QK-norm weights, each of head_dim values. */
  private qkNormWeights(op: string, qNorm: WeightHandle, kNorm: WeightHandle, headDim: number): [Pointer, Pointer] {
    const qw = asWeight(qNorm);
    const kw = asWeight(kNorm);
    if (qw.elementCount !== headDim || kw.elementCount !== headDim) throw new RangeError(`${op}: norm weights of ${qw.elementCount} and ${kw.elementCount} values for head_dim ${headDim}`);
    return [this.f32Weight(qw) as Pointer, this.f32Weight(kw) as Pointer];
  }

  qkNormRopeWriteKV(
    q: DeviceBuffer,
    k: DeviceBuffer,
    v: DeviceBuffer,
    qNorm: WeightHandle,
    kNorm: WeightHandle,
    positions: Int32Array,
    heads: number,
    kvHeads: number,
    headDim: number,
    eps: number,
    freqBase: number,
    keys: KVStorage,
    values: KVStorage,
    slots: Int32Array,
    scaling?: RopeScaling,
  ): boolean {
    const kk = asKV(keys);
    const vv = asKV(values);
    if (headDim >= 256 || headDim % 2 !== 0 || (kk.type === "q8_0" && headDim % 32 !== 0)) return false; // the ops one by one
    if (kk.type !== vv.type || kk.bytes !== vv.bytes || kk.width !== vv.width) throw new RangeError("qkNormRopeWriteKV: keys and values storage differ in type or size");
    if (slots.length !== positions.length) throw new RangeError(`qkNormRopeWriteKV: ${slots.length} slots for ${positions.length} rows`);
    const [qWeight, kWeight] = this.qkNormWeights("qkNormRopeWriteKV", qNorm, kNorm, headDim);
    if (positions.length === 0) return true;
    const qb = asBuffer(q);
    const kb = asBuffer(k);
    const vb = asBuffer(v);
    const rope = ropeScalingValues(scaling);
    this.library.call(
      "memra_cuda_qk_norm_rope_kv",
      this.context(),
      qb.pointer as Pointer,
      qb.length,
      kb.pointer as Pointer,
      kb.length,
      vb.pointer as Pointer,
      vb.length,
      qWeight,
      kWeight,
      headDim,
      this.hostPointer(positions),
      positions.length,
      heads,
      kvHeads,
      headDim,
      eps,
      freqBase,
      KV_TYPE_IDS[kk.type],
      kk.pointer as Pointer,
      vv.pointer as Pointer,
      kk.bytes,
      this.hostPointer(slots),
      rope && ptr(rope),
    );
    return true;
  }

  allocateKV(type: KVType, rows: number, width: number): KVStorage {
    if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`KV rows must be a non-negative integer, got ${rows}`);
    if (!(type in KV_TYPE_IDS)) throw new RangeError(`unknown KV type "${type}" (f32, f16, q8_0)`);
    if (type === "q8_0" && width % 32 !== 0) throw new RangeError(`q8_0 KV rows need a width that is a multiple of 32, got ${width}`);
    const bytes = rows * kvRowBytes(type, width);
    const pointer = this.deviceAlloc(Math.max(64, bytes));
    this.library.call("memra_cuda_zero", this.context(), pointer as Pointer, Math.max(64, bytes));
    return new CudaKVStorage(type, rows, width, pointer, (address) => {
      // after the backend's dispose the context freed it with everything else
      if (this.handle !== null) this.library.call("memra_cuda_free", this.handle, address as Pointer);
    });
  }

  writeKV(storage: KVStorage, slots: Int32Array, source: DeviceBuffer): void {
    if (slots.length === 0) return;
    const kv = asKV(storage);
    const x = asBuffer(source);
    this.library.call(
      "memra_cuda_kv_write",
      this.context(),
      KV_TYPE_IDS[kv.type],
      kv.pointer as Pointer,
      kv.bytes,
      kv.width,
      this.hostPointer(slots),
      slots.length,
      x.pointer as Pointer,
      x.length,
    );
  }

  writeKVPair(keys: KVStorage, values: KVStorage, slots: Int32Array, k: DeviceBuffer, v: DeviceBuffer): void {
    if (slots.length === 0) return;
    const kk = asKV(keys);
    const vv = asKV(values);
    if (kk.type !== vv.type || kk.bytes !== vv.bytes || kk.width !== vv.width) throw new RangeError("writeKVPair: keys and values storage differ in type or size");
    const kb = asBuffer(k);
    const vb = asBuffer(v);
    this.library.call(
      "memra_cuda_kv_write_pair",
      this.context(),
      KV_TYPE_IDS[kk.type],
      kk.pointer as Pointer,
      vv.pointer as Pointer,
      kk.bytes,
      kk.width,
      this.hostPointer(slots),
      slots.length,
      kb.pointer as Pointer,
      kb.length,
      vb.pointer as Pointer,
      vb.length,
    );
  }

  rotateKV(storage: KVStorage, slots: Int32Array, delta: number, heads: number, headDim: number, freqBase: number, scaling?: RopeScaling): void {
    if (slots.length === 0) return;
    const kv = asKV(storage);
    const rope = ropeScalingValues(scaling);
    this.library.call("memra_cuda_kv_rotate", this.context(), KV_TYPE_IDS[kv.type], kv.pointer as Pointer, kv.bytes, heads, headDim, this.hostPointer(slots), slots.length, delta, freqBase, rope && ptr(rope));
  }

  copyKV(storage: KVStorage, targetSlot: number, sourceSlot: number, rows: number): void {
    const kv = asKV(storage);
    if (sourceSlot < 0 || targetSlot < 0 || rows < 0 || sourceSlot + rows > kv.rows || targetSlot + rows > kv.rows) throw new RangeError("copyKV outside the storage");
    if (rows === 0 || sourceSlot === targetSlot) return;
    if (Math.abs(targetSlot - sourceSlot) < rows) throw new RangeError("copyKV: source and target slots overlap");
    this.library.call(
      "memra_cuda_copy",
      this.context(),
      (kv.pointer + targetSlot * kv.rowBytes) as Pointer,
      (kv.pointer + sourceSlot * kv.rowBytes) as Pointer,
      rows * kv.rowBytes,
    );
  }

  readKVRows(storage: KVStorage, firstSlot: number, rows: number): Uint8Array {
    const kv = asKV(storage);
    const { offset, bytes } = kvRowRange(kv, firstSlot, rows, "readKVRows");
    const out = new Uint8Array(bytes);
    if (bytes > 0) this.library.call("memra_cuda_download", this.context(), ptr(out), (kv.pointer + offset) as Pointer, bytes);
    return out;
  }

  writeKVRows(storage: KVStorage, firstSlot: number, bytes: Uint8Array): void {
    const kv = asKV(storage);
    const { offset } = kvRowRange(kv, firstSlot, kvRowsOf(kv, bytes, "writeKVRows"), "writeKVRows");
    if (bytes.byteLength > 0) this.library.call("memra_cuda_upload", this.context(), (kv.pointer + offset) as Pointer, ptr(bytes), bytes.byteLength);
  }

  attention(out: DeviceBuffer, q: DeviceBuffer, kv: KVLayerView, shape: AttentionShape): void {
    this.library.call("memra_cuda_paged_attention", this.context(), ...this.attentionArguments("attention", out, q, kv, shape));
  }

  attentionMatmul(
    projected: DeviceBuffer,
    out: DeviceBuffer,
    q: DeviceBuffer,
    kv: KVLayerView,
    shape: AttentionShape,
    weight: WeightHandle,
    residual?: ResidualNorm,
  ): void | "normed" {
    const p = asBuffer(projected);
    const w = asWeight(weight);
    if (w.shape[0] !== shape.heads * shape.headDim) {
      throw new RangeError(`attentionMatmul: the weight takes ${w.shape[0]} inputs, the attention gives ${shape.heads} heads × ${shape.headDim}`);
    }
    const attention = this.attentionArguments("attentionMatmul", out, q, kv, shape);
    const then = this.residualArgument(residual, w, shape.rows);
    this.library.call("memra_cuda_attention_matmul", this.context(), p.pointer as Pointer, p.length, ...attention, w.kernelType, w.pointer as Pointer, w.byteLength, w.shape[1] ?? 1, then);
    return then === null ? undefined : "normed";
  }

  /**
   * memra_cuda_residual_norm for a projection of `rows` rows by `weight` into the residual stream,
   * where the model offers one and the projection's kernel takes it (fusedNorm, q8_0 on 1 or 2
   * rows: memra_cuda_matmul_norm_tail_applies); else null (the op does not do the norm).
   */
  private residualArgument(residual: ResidualNorm | undefined, weight: CudaWeight, rows: number): Pointer | null {
    if (residual === undefined || !this.fusedNorm) return null;
    const [nIn, nOut] = [weight.shape[0]!, weight.shape[1] ?? 1];
    if (this.library.symbols.memra_cuda_matmul_norm_tail_applies(this.context(), weight.kernelType, rows, nIn, nOut) !== 1) return null;
    const [h, n, w] = [asBuffer(residual.hidden), asBuffer(residual.normed), asWeight(residual.weight)];
    if (w.elementCount !== nOut) throw new RangeError(`the residual norm's weight has ${w.elementCount} values for a projection of ${nOut} features`);
    // memra_cuda_residual_norm: hidden, hidden_length, normed, normed_length, weight, weight_length (8 bytes each), eps (f32)
    const fields = [h.pointer, h.length, n.pointer, n.length, this.f32Weight(w), w.elementCount];
    fields.forEach((field, i) => this.residualNorm.setBigInt64(i * 8, BigInt(field as number), true));
    this.residualNorm.setFloat32(48, residual.eps, true);
    return ptr(this.residualNorm);
  }

  /**
   * A decode step's QK-norm, RoPE, K/V write, attention and O projection with the first three in the
   * attention kernel (memra_cuda_qk_norm_rope_attention_matmul). Declines (false, nothing done) where
   * that kernel does not apply: a sequence with several query rows, head_dim not a multiple of 64
   * below 256, or fusedAttention off.
   */
  qkNormRopeAttentionMatmul(
    projected: DeviceBuffer,
    out: DeviceBuffer,
    q: DeviceBuffer,
    k: DeviceBuffer,
    v: DeviceBuffer,
    qNorm: WeightHandle,
    kNorm: WeightHandle,
    positions: Int32Array,
    eps: number,
    freqBase: number,
    slots: Int32Array,
    kv: KVLayerView,
    shape: AttentionShape,
    weight: WeightHandle,
    residual?: ResidualNorm,
    scaling?: RopeScaling,
  ): boolean | "normed" {
    const op = "qkNormRopeAttentionMatmul";
    if (!this.fusedAttention || shape.headDim % 64 !== 0 || shape.headDim >= 256 || kv.sequences.length / 4 !== shape.rows || shape.rows === 0) return false;
    if (positions.length !== shape.rows || slots.length !== shape.rows) throw new RangeError(`${op}: ${positions.length} positions and ${slots.length} slots for ${shape.rows} rows`);
    const p = asBuffer(projected);
    const w = asWeight(weight);
    if (w.shape[0] !== shape.heads * shape.headDim) {
      throw new RangeError(`${op}: the weight takes ${w.shape[0]} inputs, the attention gives ${shape.heads} heads × ${shape.headDim}`);
    }
    const attention = this.attentionArguments(op, out, q, kv, shape);
    const [qWeight, kWeight] = this.qkNormWeights(op, qNorm, kNorm, shape.headDim);
    const [key, value] = [asBuffer(k), asBuffer(v)];
    // memra_cuda_qk_inputs: k, k_length, v, v_length, q_weight, k_weight, weight_length, positions, slots (8 bytes each), eps, freq_base (f32)
    const qk = new DataView(new ArrayBuffer(80));
    const fields = [key.pointer, key.length, value.pointer, value.length, qWeight, kWeight, shape.headDim, this.hostPointer(positions), this.hostPointer(slots)];
    fields.forEach((field, i) => qk.setBigInt64(i * 8, BigInt(field as number), true));
    qk.setFloat32(72, eps, true);
    qk.setFloat32(76, freqBase, true);
    const then = this.residualArgument(residual, w, shape.rows);
    const rope = ropeScalingValues(scaling);
    // memra_cuda_attention_matmul's arguments, then the K/V side, the residual norm and the RoPE scaling
    this.library.call(
      "memra_cuda_qk_norm_rope_attention_matmul",
      this.context(),
      p.pointer as Pointer,
      p.length,
      ...attention,
      w.kernelType,
      w.pointer as Pointer,
      w.byteLength,
      w.shape[1] ?? 1,
      ptr(qk),
      then,
      rope && ptr(rope),
    );
    return then === null ? true : "normed";
  }

  /** memra_cuda_paged_attention's arguments after the context (out … scale), which memra_cuda_attention_matmul takes too. */
  private attentionArguments(op: string, out: DeviceBuffer, q: DeviceBuffer, kv: KVLayerView, shape: AttentionShape): AttentionArguments {
    const o = asBuffer(out);
    const query = asBuffer(q);
    const keys = asKV(kv.keys);
    const values = asKV(kv.values);
    if (keys.type !== values.type || keys.bytes !== values.bytes) throw new RangeError(`${op}: keys and values storage differ in type or size`);
    return [
      o.pointer as Pointer,
      o.length,
      query.pointer as Pointer,
      query.length,
      KV_TYPE_IDS[keys.type],
      keys.pointer as Pointer,
      values.pointer as Pointer,
      keys.bytes,
      kv.blockTokens,
      this.hostPointer(kv.blockTables),
      kv.blockTables.length,
      this.hostPointer(kv.sequences),
      kv.sequences.length / 4,
      shape.rows,
      shape.heads,
      shape.kvHeads,
      shape.headDim,
      shape.scale,
    ];
  }

  swiglu(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, length: number): void {
    const o = asBuffer(out);
    const g = asBuffer(gate);
    const u = asBuffer(up);
    this.library.call("memra_cuda_swiglu", this.context(), o.pointer as Pointer, o.length, g.pointer as Pointer, g.length, u.pointer as Pointer, u.length, length);
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, length: number): void {
    const o = asBuffer(out);
    const x = asBuffer(a);
    const y = asBuffer(b);
    this.library.call("memra_cuda_add", this.context(), o.pointer as Pointer, o.length, x.pointer as Pointer, x.length, y.pointer as Pointer, y.length, length);
  }

  moeRoute(logits: DeviceBuffer, rows: number, experts: number, k: number): { ids: Int32Array; weights: Float32Array } {
    const ids = new Int32Array(Math.max(1, rows * k)).subarray(0, rows * k);
    const weights = new Float32Array(Math.max(1, rows * k)).subarray(0, rows * k);
    if (rows === 0) return { ids, weights };
    const l = asBuffer(logits);
    this.library.call("memra_cuda_moe_route", this.context(), ptr(ids), ptr(weights), rows * k, l.pointer as Pointer, l.length, rows, experts, k);
    return { ids, weights };
  }

  moeExperts(
    out: DeviceBuffer,
    x: DeviceBuffer,
    logits: DeviceBuffer,
    weights: { readonly gate: WeightHandle; readonly up: WeightHandle; readonly down: WeightHandle },
    rows: number,
    experts: number,
    k: number,
  ): boolean {
    const gate = asWeight(weights.gate);
    const up = asWeight(weights.up);
    const down = asWeight(weights.down);
    // q4_1 / q5_1 experts need the offset correction of their q8_1 activations: the gather path.
    if ([gate, up, down].some((w) => w.type === GGMLType.Q4_1 || w.type === GGMLType.Q5_1 || !this.supportsOp("expertMatmul", w.type))) return false;
    const o = asBuffer(out);
    const input = asBuffer(x);
    const l = asBuffer(logits);
    this.library.call(
      "memra_cuda_moe_experts",
      this.context(),
      o.pointer as Pointer,
      o.length,
      input.pointer as Pointer,
      input.length,
      l.pointer as Pointer,
      l.length,
      rows,
      experts,
      k,
      gate.kernelType,
      gate.pointer as Pointer,
      gate.byteLength,
      up.kernelType,
      up.pointer as Pointer,
      up.byteLength,
      down.kernelType,
      down.pointer as Pointer,
      down.byteLength,
      gate.shape[0]!,
      gate.shape[1] ?? 1,
    );
    return true;
  }

  gatherRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, width: number): void {
    if (rows.length === 0) return;
    const o = asBuffer(out);
    const input = asBuffer(x);
    this.library.call("memra_cuda_gather_rows", this.context(), o.pointer as Pointer, o.length, input.pointer as Pointer, input.length, this.hostPointer(rows), rows.length, width);
  }

  scatterAddRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, scales: Float32Array, width: number): void {
    if (rows.length === 0) return;
    if (scales.length < rows.length) throw new RangeError(`scatterAddRows: ${rows.length} rows but ${scales.length} scales`);
    const o = asBuffer(out);
    const input = asBuffer(x);
    this.library.call(
      "memra_cuda_scatter_add_rows",
      this.context(),
      o.pointer as Pointer,
      o.length,
      input.pointer as Pointer,
      input.length,
      this.hostPointer(rows),
      this.hostPointer(scales),
      rows.length,
      width,
    );
  }

  private capture(record: () => void): BackendGraph {
    const context = this.context();
    if (this.captured) throw new Error("captureGraph: already capturing (graphs do not nest)");
    this.library.call("memra_cuda_graph_begin", context);
    const captured = new Map<string, HostArray>();
    this.captured = captured;
    const out = new BigUint64Array(1);
    try {
      record();
    } catch (error) {
      this.captured = undefined;
      this.library.symbols.memra_cuda_graph_abort(context);
      throw error;
    }
    this.captured = undefined;
    this.library.call("memra_cuda_graph_end", context, ptr(out));
    const handle = Number(out[0]) as Pointer;
    try {
      const info = new BigInt64Array(3);
      this.library.call("memra_cuda_graph_info", context, handle, ptr(info), ptr(info, 8), ptr(info, 16));
      const inputs: HostArray[] = [];
      const address = new BigUint64Array(1);
      const bytes = new BigInt64Array(1);
      for (let i = 0; i < Number(info[0]); i++) {
        this.library.call("memra_cuda_graph_input", context, handle, i, ptr(address), ptr(bytes));
        const array = captured.get(`${address[0]}:${bytes[0]}`);
        if (array === undefined) {
          throw new Error(`captureGraph: graph input ${i} (${bytes[0]} bytes at 0x${address[0]!.toString(16)}) is not an index array passed to an op while recording`);
        }
        inputs.push(array);
      }
      const graph = new CudaGraph(this, handle, inputs, Number(info[1]), Number(info[2]));
      this.liveGraphs.add(graph);
      return graph;
    } catch (error) {
      this.library.symbols.memra_cuda_graph_destroy(context, handle);
      throw error;
    }
  }

  /** Destroys the context: waits for the stream and frees every device allocation (and graph). Safe twice. */
  dispose(): void {
    if (this.handle === null) return;
    const handle = this.handle;
    this.handle = null;
    for (const graph of this.liveGraphs) graph.detach();
    this.liveGraphs.clear();
    this.library.symbols.memra_cuda_destroy(handle);
  }

  /** @internal the context handle (throws when disposed). */
  contextHandle(): Pointer {
    return this.context();
  }

  /** @internal */
  get disposed(): boolean {
    return this.handle === null;
  }

  /** @internal */
  forgetGraph(graph: CudaGraph): void {
    this.liveGraphs.delete(graph);
  }

  /** A host index array's address for the library (bun:ffi needs a non-empty typed array); remembered while capturing. */
  private hostPointer(array: HostArray): Pointer {
    if (array.length === 0) return ptr(new Int32Array(1));
    const pointer = ptr(array);
    this.captured?.set(`${pointer}:${array.byteLength}`, array);
    return pointer;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  private context(): Pointer {
    if (this.handle === null) throw new CudaBackendDisposedError();
    return this.handle;
  }

  private deviceAlloc(bytes: number): number {
    const pointer = this.library.symbols.memra_cuda_alloc(this.context(), bytes);
    if (pointer === null || pointer === 0) {
      this.library.call("memra_cuda_synchronize", this.context()); // surfaces a sticky fault first
      throw new RangeError(`cuda: allocating ${bytes} bytes failed: ${this.library.lastError()}`);
    }
    return pointer as number;
  }

  /** A norm weight as f32 on the device: the upload itself when f32, else dequantized once. */
  private f32Weight(weight: CudaWeight): number {
    if (weight.type === GGMLType.F32) return weight.pointer;
    if (weight.f32Pointer === undefined) {
      const pointer = this.deviceAlloc(weight.elementCount * 4);
      this.library.call("memra_cuda_dequantize", this.context(), pointer as Pointer, weight.elementCount, weight.kernelType, weight.pointer as Pointer, weight.byteLength, weight.elementCount);
      weight.f32Pointer = pointer;
    }
    return weight.f32Pointer;
  }
}

function asBuffer(buffer: DeviceBuffer): CudaBuffer {
  if (!(buffer instanceof CudaBuffer)) throw new TypeError("the buffer was not allocated by a CudaBackend");
  return buffer;
}

/** RoPE scaling as the fused QK-norm ops take it: 5 host floats (freq_scale, ext_factor, magnitude, corr_low, corr_high), or null for plain RoPE. */
function ropeScalingValues(scaling: RopeScaling | undefined): Float32Array | null {
  return scaling ? Float32Array.of(scaling.freqScale, scaling.extFactor, scaling.magnitude, scaling.low, scaling.high) : null;
}

function asKV(storage: KVStorage): CudaKVStorage {
  if (!(storage instanceof CudaKVStorage)) throw new TypeError("the KV storage was not allocated by a CudaBackend");
  if (storage.disposed) throw new KVStorageDisposedError();
  return storage;
}

function asWeight(weight: WeightHandle): CudaWeight {
  if (!(weight instanceof CudaWeight)) throw new TypeError(`weight "${weight.name}" was not uploaded to a CudaBackend`);
  return weight;
}
