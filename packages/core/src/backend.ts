/**
 * The backend contract: the op set a model is written against (DESIGN.md), types only. Core
 * imports nothing else from a backend; concrete backends are found at run time. Every op takes
 * its output first. Activations are f32, token-major: a buffer of `rows` tokens holds row r at
 * [r * width, (r + 1) * width).
 */
import type { GGMLType, GGUFTensorInfo } from "@memra/gguf";
import type { RopeScaling } from "./models/rope-scaling";

export const BACKEND_CONTRACT_VERSION = 3;

/** The largest k a backend's topKRows must take (a larger top-k reads the logits back). */
export const TOP_K_ROWS_MAX = 1024;

/** An f32 activation buffer owned by a backend (host memory, device memory, ...). Opaque. */
export interface DeviceBuffer {
  /** Number of f32 elements. */
  readonly length: number;
}

/** A weight tensor as the backend keeps it (possibly still quantized). Opaque beyond these fields. */
export interface WeightHandle {
  readonly name: string;
  readonly type: GGMLType;
  /** Innermost first, as in GGUF: a matrix is [inFeatures, outFeatures(, experts)]. */
  readonly shape: readonly number[];
}

/** The ops a model calls. `supportsOp` lets a model ask before it calls an optional op. */
export type BackendOp =
  | "embedding"
  | "rmsNorm"
  | "matmul"
  | "ropeNeox"
  | "attention"
  | "swiglu"
  | "add"
  | "moeRoute"
  | "expertMatmul"
  | "gatherRows"
  | "scatterAddRows";

/** Element type of KV cache storage: f16 by default, f32 exact, q8_0 (34 bytes per 32 values) smallest. */
export type KVType = "f32" | "f16" | "q8_0";

/** Bytes of one stored row of `width` values (width a multiple of 32 for q8_0). */
export function kvRowBytes(type: KVType, width: number): number {
  if (type === "f32") return width * 4;
  if (type === "f16") return width * 2;
  return (width / 32) * 34;
}

/** The rows of a readKVRows/writeKVRows call: checks the range, returns the byte offset and length. */
export function kvRowRange(storage: KVStorage, firstSlot: number, rows: number, op: string): { readonly offset: number; readonly bytes: number } {
  if (!Number.isInteger(firstSlot) || !Number.isInteger(rows) || firstSlot < 0 || rows < 0 || firstSlot + rows > storage.rows) {
    throw new RangeError(`${op}: slots [${firstSlot}, ${firstSlot + rows}) outside a KV storage of ${storage.rows}`);
  }
  const rowBytes = kvRowBytes(storage.type, storage.width);
  return { offset: firstSlot * rowBytes, bytes: rows * rowBytes };
}

/** readKVRows of a storage held in host memory as `stored` (its rows' bytes, back to back). */
export function readHostKVRows(storage: KVStorage, stored: Uint8Array, firstSlot: number, rows: number): Uint8Array {
  const { offset, bytes } = kvRowRange(storage, firstSlot, rows, "readKVRows");
  return stored.slice(offset, offset + bytes);
}

/** writeKVRows of a storage held in host memory as `stored`. */
export function writeHostKVRows(storage: KVStorage, stored: Uint8Array, firstSlot: number, bytes: Uint8Array): void {
  const { offset } = kvRowRange(storage, firstSlot, kvRowsOf(storage, bytes, "writeKVRows"), "writeKVRows");
  stored.set(bytes, offset);
}

/** The rows a writeKVRows of `bytes` stores (whole rows only). */
export function kvRowsOf(storage: KVStorage, bytes: Uint8Array, op: string): number {
  const rowBytes = kvRowBytes(storage.type, storage.width);
  if (bytes.byteLength % rowBytes !== 0) throw new RangeError(`${op}: ${bytes.byteLength} bytes are not whole rows of ${rowBytes} bytes`);
  return bytes.byteLength / rowBytes;
}

/**
 * KV cache storage owned by a backend: `rows` rows ("slots") of `width` values of `type`. A paged
 * cache puts block b's token t at slot b * blockTokens + t. Opaque beyond these fields.
 */
export interface KVStorage {
  readonly type: KVType;
  readonly rows: number;
  readonly width: number;
  /**
   * Makes the storage resident now (writes every page), as llama.cpp clears its KV buffers when a
   * context is created: a server then holds its memory from the start instead of growing while
   * blocks are used for the first time. Optional: storage that is resident when allocated has none.
   */
  prefault?(): void;
  /**
   * Optional: gives the storage's memory back to its backend, which may hand it, as it is, to a
   * later allocateKV (CpuBackend: a new cache then writes pages already mapped instead of faulting
   * in fresh ones). The storage must not be used after. Safe twice.
   */
  dispose?(): void;
}

/**
 * What one layer's attention reads, for a batch of sequences that each have their own block table
 * into shared storage. Query rows of a call are the sequences' rows back to back.
 */
export interface KVLayerView {
  readonly keys: KVStorage;
  readonly values: KVStorage;
  /** Tokens per block. */
  readonly blockTokens: number;
  /** Every sequence's block table, concatenated: block ids into the storage. */
  readonly blockTables: Int32Array;
  /**
   * [sequences, 4]: per sequence (first query row in this call, query rows, cache position of
   * its first query row, offset of its block table in `blockTables`). Query row r of the sequence
   * attends to its cache positions [0, position + r]; all of them are already written.
   */
  readonly sequences: Int32Array;
}

export interface AttentionShape {
  /** Query rows (tokens) in this call, all sequences together. */
  readonly rows: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly scale: number;
}

/**
 * The residual add and RMSNorm that follow a projection into the residual stream, which the op
 * making the projection may do itself (attentionMatmul, qkNormRopeAttentionMatmul,
 * rmsNormSwigluMatmul given one): hidden += projected, then normed = RMSNorm(hidden) · weight
 * (rows of weight.length), the values addRmsNorm(normed, hidden, projected, weight, rows, eps)
 * gives. The op says whether it did by returning "normed"; the caller then must not add projected
 * again, and calls the next norm (rmsNormMatmuls, rmsNormSwigluMatmul without delta, or rmsNorm of
 * the same normed, hidden, weight and eps) next, which a backend may then skip (CUDA: the tail of
 * the projection's kernel has normed and rounded the rows already).
 */
export interface ResidualNorm {
  readonly hidden: DeviceBuffer;
  readonly normed: DeviceBuffer;
  readonly weight: WeightHandle;
  readonly eps: number;
}

/** Ops recorded once and run again on each replay (CudaBackend: a CUDA graph). */
export interface BackendGraph {
  /** Runs the recorded ops again (queued like ops), reading the current contents of the host arrays they were recorded with. */
  replay(): void;
  /** Frees the graph (waits for its last replay). Safe twice. */
  dispose(): void;
}

export interface Backend {
  readonly contractVersion: typeof BACKEND_CONTRACT_VERSION;
  readonly name: string;

  /** Whether the backend can run `op` (with weights of `weightType`, where that matters). */
  supportsOp(op: BackendOp, weightType?: GGMLType): boolean;

  /** Takes a weight from the file; the backend may keep it quantized, convert it or copy it. */
  uploadWeight(info: GGUFTensorInfo, data: Uint8Array): WeightHandle;
  /** Bytes the backend holds for this weight. */
  weightBytes(weight: WeightHandle): number;

  allocate(length: number): DeviceBuffer;
  write(buffer: DeviceBuffer, data: Float32Array, offset?: number): void;
  /** Copies `length` elements starting at `offset` out of the buffer. */
  read(buffer: DeviceBuffer, offset?: number, length?: number): Float32Array;
  /** Copies `length` elements starting at `offset` into `target` at `targetOffset`, without an intermediate array (optional: read() + set() otherwise). */
  readInto?(buffer: DeviceBuffer, offset: number, length: number, target: Float32Array, targetOffset: number): void;
  /**
   * Optional: greedy tokens without reading the logits back: out[r] for r < rows = the first index
   * of the largest value of row r of `logits` ([rows, columns] from element 0), exactly as the
   * sampler's argmax picks it (values compared with >, from index 0: a NaN never wins, ties go to
   * the lower index, a NaN at index 0 gives 0).
   */
  argmaxRows?(out: Int32Array, logits: DeviceBuffer, rows: number, columns: number): void;
  /**
   * Optional: each row's best candidates without reading the logits back: for r < rows and
   * j < k, ids[r * k + j] and values[r * k + j] are the k largest values of row r of `logits`
   * ([rows, columns] from element 0) and their indices, in descending order, equal values by
   * ascending index, -0 equal to +0 (as the sampler's top-k orders candidates), values with their
   * exact bits. k from 1 to min(columns, TOP_K_ROWS_MAX).
   */
  topKRows?(ids: Int32Array, values: Float32Array, logits: DeviceBuffer, rows: number, columns: number, k: number): void;
  /**
   * Optional: log-probabilities of given tokens without reading the logits back: out[r] =
   * logits[r, targets[r]] − log Σ_c exp(logits[r, c]) for r < rows (`logits` [rows, columns] from
   * element 0; each target in 0..columns − 1), within 1e-5 · max(1, |out[r]|) of that computed in
   * double precision (an f32 result: a GPU's sum of the row's exponentials).
   */
  logSoftmaxAt?(out: Float32Array, logits: DeviceBuffer, rows: number, columns: number, targets: Int32Array): void;
  /** Copies `length` elements between buffers of this backend. */
  copy(out: DeviceBuffer, outOffset: number, source: DeviceBuffer, sourceOffset: number, length: number): void;

  /** out[r] = table row tokens[r]. out: [tokens.length, embeddingLength] */
  embedding(out: DeviceBuffer, table: WeightHandle, tokens: Int32Array): void;
  /** out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, over rows of weight.length. */
  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void;
  /**
   * Optional: the residual add and the next RMSNorm together: hidden += delta, then
   * out = RMSNorm(hidden) · weight (rows of weight.length); the same as add then rmsNorm.
   */
  addRmsNorm?(out: DeviceBuffer, hidden: DeviceBuffer, delta: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void;
  /** out[r, o] = sum_i x[r, i] * W[o, i]. x: [rows, in], out: [rows, out] */
  matmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number): void;
  /**
   * Optional: matmul(outs[i], x, weights[i], rows) for every i, with the same results, where the
   * backend saves work by doing them together (one input, several weights: Q/K/V, gate/up). The
   * weights share their input width; at most 8.
   */
  matmuls?(outs: readonly DeviceBuffer[], x: DeviceBuffer, weights: readonly WeightHandle[], rows: number): void;
  /**
   * Optional: an RMSNorm and the matmuls that read it: normed = RMSNorm(hidden) · normWeight (rows
   * of normWeight.length; with `delta`, hidden += delta first, as addRmsNorm), then
   * matmuls(outs, normed, weights, rows); the same results as those ops one after the other.
   */
  rmsNormMatmuls?(
    normed: DeviceBuffer,
    hidden: DeviceBuffer,
    delta: DeviceBuffer | undefined,
    normWeight: WeightHandle,
    eps: number,
    outs: readonly DeviceBuffer[],
    weights: readonly WeightHandle[],
    rows: number,
  ): void;
  /** NEOX rotary embedding in place: each head rotates pairs (i, i + headDim / 2). x: [rows, heads * headDim] */
  ropeNeox(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number): void;
  /**
   * Optional: ropeNeox with RoPE scaling (linear or YaRN; see models/rope-scaling.ts), as ggml's
   * rope_yarn: pair i's angle becomes scaledRopeAngle(scaling, i, angle) and its cos and sin are
   * multiplied by scaling.magnitude. A model with scaling runs only on backends that have it.
   */
  ropeNeoxScaled?(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number, scaling: RopeScaling): void;
  /**
   * Optional: Qwen3's QK-norm and RoPE together, in place, for rows = positions.length: the same as
   * rmsNorm(q, q, qNorm, rows * heads, eps), rmsNorm(k, k, kNorm, rows * kvHeads, eps), then
   * ropeNeox of q (heads) and of k (kvHeads) at `positions` (with `scaling`, ropeNeoxScaled). A
   * backend may decline a shape, or a scaling it does not apply, by returning false (then nothing
   * was done).
   */
  qkNormRope?(
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
  ): boolean;
  /**
   * Optional: qkNormRope (with `scaling`), then writeKVPair(keys, values, slots, k, v) (slots: one
   * per row), in one op with the same results. A backend may decline a shape by returning false
   * (then nothing was done).
   */
  qkNormRopeWriteKV?(
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
  ): boolean;
  /** KV storage of `rows` slots of `width` values of `type` (zeroed). */
  allocateKV(type: KVType, rows: number, width: number): KVStorage;
  /** Stores rows [0, slots.length) of `source` ([rows, width] f32) at `slots`, converting to the storage type. */
  writeKV(storage: KVStorage, slots: Int32Array, source: DeviceBuffer): void;
  /** Optional: writeKV(keys, slots, k) and writeKV(values, slots, v) in one op (storages of one type and size). */
  writeKVPair?(keys: KVStorage, values: KVStorage, slots: Int32Array, k: DeviceBuffer, v: DeviceBuffer): void;
  /** Copies `rows` slots from `sourceSlot` to `targetSlot` (copy-on-write of a block). */
  copyKV(storage: KVStorage, targetSlot: number, sourceSlot: number, rows: number): void;
  /**
   * Optional: the context shift's K shift (llama.cpp's build_rope_shift) on the backend: the key rows
   * stored at `slots` (distinct) rotated in place by `delta` positions, as ropeNeox (with `scaling`,
   * ropeNeoxScaled) rotates rows of `heads` heads of `headDim`, through f32 and stored back as
   * writeKV stores. Without it, the rows go through the host (see Transformer.shiftCache).
   */
  rotateKV?(storage: KVStorage, slots: Int32Array, delta: number, heads: number, headDim: number, freqBase: number, scaling?: RopeScaling): void;
  /**
   * Slots [firstSlot, firstSlot + rows) as they are stored: kvRowBytes(type, width) bytes a row,
   * f32 and f16 little-endian, q8_0 in ggml's block layout (an f16 scale, then 32 int8). What a
   * saved KV state holds (see saveKVState), so that a state saved on one backend loads on another.
   */
  readKVRows(storage: KVStorage, firstSlot: number, rows: number): Uint8Array;
  /** Stores whole rows in readKVRows's form at slots firstSlot, firstSlot + 1, ... */
  writeKVRows(storage: KVStorage, firstSlot: number, bytes: Uint8Array): void;
  /**
   * Causal scaled-dot-product attention with grouped KV heads, per sequence through its block
   * table (KVLayerView). q/out: [rows, heads * headDim]
   */
  attention(out: DeviceBuffer, q: DeviceBuffer, kv: KVLayerView, shape: AttentionShape): void;
  /**
   * Optional: attention into `out` as attention() does, then projected = matmul(out, weight,
   * shape.rows): the same as the two calls, where the backend can hand the attention's result to the
   * matmul in the form it reads (rounded codes) without another pass. With `residual`, it may also
   * do that norm after the projection (ResidualNorm), returning "normed" where it did.
   */
  attentionMatmul?(
    projected: DeviceBuffer,
    out: DeviceBuffer,
    q: DeviceBuffer,
    kv: KVLayerView,
    shape: AttentionShape,
    weight: WeightHandle,
    residual?: ResidualNorm,
  ): void | "normed";
  /**
   * Optional: rmsNormMatmuls(normed, hidden, delta, normWeight, eps, [gate, up], [gateWeight,
   * upWeight], rows), then swigluMatmul(projected, gate, up, downWeight, rows), in one op with the
   * same results (a dense SwiGLU feed-forward after its norm). A backend may decline (returning
   * false: nothing was done), e.g. CUDA for weight types or row counts its fused kernel does not take.
   * With `residual`, it may also do that norm after the down projection (ResidualNorm), returning
   * "normed" where it did (true: done without it).
   */
  rmsNormSwigluMatmul?(
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
  ): boolean | "normed";
  /**
   * Optional: qkNormRopeWriteKV(q, k, v, qNorm, kNorm, positions, shape.heads, shape.kvHeads,
   * shape.headDim, eps, freqBase, kv.keys, kv.values, slots, scaling), then attentionMatmul(projected, out,
   * q, kv, shape, weight), in one op: the same out, projected and K/V storage, but q and k may be
   * left as they were (not normed in place). A backend may decline (returning false: nothing was
   * done), e.g. CUDA where a sequence has several query rows. With `residual`, it may also do that
   * norm after the projection (ResidualNorm), returning "normed" where it did (true: done without it).
   */
  qkNormRopeAttentionMatmul?(
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
  ): boolean | "normed";
  /** out = silu(gate) * up, elementwise over `length`. */
  swiglu(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, length: number): void;
  /**
   * Optional: out = matmul of silu(gate) ⊙ up ([rows, weight inputs]) by `weight`, without storing
   * the product (gate and up keep their values); the same as swiglu into a buffer, then matmul.
   */
  swigluMatmul?(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, weight: WeightHandle, rows: number): void;
  /** out = a + b, elementwise over `length`. */
  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, length: number): void;
  /**
   * MoE routing: softmax over all experts' logits, top-k, renormalised weights.
   * logits: [rows, experts]; returns expert ids and weights, [rows, k] each, on the host.
   */
  moeRoute(logits: DeviceBuffer, rows: number, experts: number, k: number): { ids: Int32Array; weights: Float32Array };
  /**
   * Optional: a routed-experts FFN for any number of rows with nothing read back to the host:
   * route `logits` [rows, experts] as moeRoute does, run each row's k chosen experts' SwiGLU FFN
   * (gate/up [embedding, ffn, experts], down [ffn, embedding, experts]) and set out[r] to their
   * routing-weighted sum. Returns false, having done nothing, where the backend has no kernel for
   * these weights; the answer depends on the weights alone (rows 0: only that question).
   */
  moeExperts?(
    out: DeviceBuffer,
    x: DeviceBuffer,
    logits: DeviceBuffer,
    weights: { readonly gate: WeightHandle; readonly up: WeightHandle; readonly down: WeightHandle },
    rows: number,
    experts: number,
    k: number,
  ): boolean;
  /** matmul with expert `expert` of a 3-D weight [in, out, experts], over `rows` rows of x. */
  expertMatmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, expert: number, rows: number): void;
  /** out[i] = x[rows[i]], rows of `width`. */
  gatherRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, width: number): void;
  /** out[rows[i]] += scales[i] * x[i], rows of `width`. */
  scatterAddRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, scales: Float32Array, width: number): void;

  /**
   * Optional: calls `record` with this backend recording the ops it calls instead of running them
   * (nothing runs until replay()), and returns them as a graph. The host arrays those ops are given
   * (tokens, positions, slots, block tables, sequences) are the graph's inputs: each replay reads
   * their contents at that moment, so a caller refills the same arrays (same objects, same lengths)
   * and replays. Inside `record`, nothing may come back to the host (read, readInto, write,
   * moeRoute). If `record` throws, the recording is discarded and the error rethrown. Returns
   * undefined, without calling `record`, where the backend does not record graphs (turned off).
   */
  captureGraph?(record: () => void): BackendGraph | undefined;

  dispose(): void;
}
