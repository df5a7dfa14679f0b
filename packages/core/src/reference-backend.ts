/**
 * The reference backend: plain TypeScript, f32 activations, weights dequantized with
 * @memra/gguf's reference code. Readable rather than fast; it is the oracle native backends are
 * tested against. Sums accumulate in double precision.
 */
import { GGMLType, type GGUFTensorInfo, canDequantize, dequantize, f16BitsToF32, ggmlTypeName, quantize } from "@memra/gguf";
import {
  type AttentionShape,
  BACKEND_CONTRACT_VERSION,
  type Backend,
  type BackendOp,
  type DeviceBuffer,
  type KVLayerView,
  type KVStorage,
  type KVType,
  type WeightHandle,
  kvRowBytes,
  readHostKVRows,
  writeHostKVRows,
} from "./backend";
import { activationRoundingFor, q8_1SumCorrections, roundActivations } from "./activation-rounding";
import { type RopeScaling, rotateNeox } from "./models/rope-scaling";
import { UnsupportedTensorTypeError } from "./errors";
import { HostTopK } from "./top-candidates";

class HostBuffer implements DeviceBuffer {
  constructor(readonly data: Float32Array) {}
  get length(): number {
    return this.data.length;
  }
}

const KV_GGML_TYPES: Record<KVType, GGMLType> = { f32: GGMLType.F32, f16: GGMLType.F16, q8_0: GGMLType.Q8_0 };

/** KV slots as the bytes ggml would store (f32, f16 or q8_0 rows), converted on write and read. */
class HostKVStorage implements KVStorage {
  readonly rowBytes: number;
  readonly bytes: Uint8Array; // [rows, rowBytes]

  constructor(
    readonly type: KVType,
    readonly rows: number,
    readonly width: number,
  ) {
    this.rowBytes = kvRowBytes(type, width);
    this.bytes = new Uint8Array(rows * this.rowBytes);
  }

  prefault(): void {
    this.bytes.fill(0);
  }

  /** Slot `slot` as f32, into out[0, width). */
  readRow(slot: number, out: Float32Array): void {
    dequantize(KV_GGML_TYPES[this.type], this.bytes.subarray(slot * this.rowBytes, (slot + 1) * this.rowBytes), this.width, out);
  }
}

function hostKV(storage: KVStorage): HostKVStorage {
  if (!(storage instanceof HostKVStorage)) throw new TypeError("the KV storage was not allocated by a ReferenceBackend");
  return storage;
}

class ReferenceWeight implements WeightHandle {
  constructor(
    readonly name: string,
    readonly type: GGMLType,
    readonly shape: readonly number[],
    /** Dequantized values, row-major: rows of shape[0]. */
    readonly values: Float32Array,
    /** q4_1 / q5_1 only: each 32-value block's offset m, [rows, shape[0] / 32]. */
    readonly blockOffsets?: Float32Array,
  ) {}
}

/** The f16 `m` of every q4_1 / q5_1 block (bytes 2–3 of each block). */
function blockOffsetsOf(type: GGMLType, data: Uint8Array, elementCount: number): Float32Array | undefined {
  if (type !== GGMLType.Q4_1 && type !== GGMLType.Q5_1) return undefined;
  const blockBytes = type === GGMLType.Q4_1 ? 20 : 24;
  const blocks = elementCount / 32;
  const offsets = new Float32Array(blocks);
  for (let b = 0; b < blocks; b++) offsets[b] = f16BitsToF32(data[b * blockBytes + 2]! | (data[b * blockBytes + 3]! << 8));
  return offsets;
}

function host(buffer: DeviceBuffer): Float32Array {
  return (buffer as HostBuffer).data;
}

function weightValues(weight: WeightHandle): Float32Array {
  return (weight as ReferenceWeight).values;
}

export interface ReferenceBackendOptions {
  /**
   * Round activation rows the way ggml's CPU matmul does before a dot product with a quantized,
   * f16 or bf16 weight (to q8_0, q8_K, f16 or bf16; see activation-rounding.ts), so that results
   * match llama.cpp up to summation order. Default true; false keeps activations exact in f32,
   * which shows how far llama.cpp itself is from exact arithmetic on a quantized model.
   */
  readonly ggmlActivationRounding?: boolean;
}

export class ReferenceBackend implements Backend {
  readonly contractVersion = BACKEND_CONTRACT_VERSION;
  readonly name = "reference";
  private readonly ggmlActivationRounding: boolean;
  private rounded = new Float32Array(0);
  private readonly topK = new HostTopK();

  constructor(options: ReferenceBackendOptions = {}) {
    this.ggmlActivationRounding = options.ggmlActivationRounding ?? true;
  }

  supportsOp(_op: BackendOp, weightType?: GGMLType): boolean {
    return weightType === undefined || canDequantize(weightType);
  }

  uploadWeight(info: GGUFTensorInfo, data: Uint8Array): WeightHandle {
    if (!canDequantize(info.type)) throw new UnsupportedTensorTypeError(info.name, ggmlTypeName(info.type), this.name);
    const values = dequantize(info.type, data, info.elementCount);
    return new ReferenceWeight(info.name, info.type, info.shape, values, blockOffsetsOf(info.type, data, info.elementCount));
  }

  weightBytes(weight: WeightHandle): number {
    return weightValues(weight).byteLength;
  }

  allocate(length: number): DeviceBuffer {
    return new HostBuffer(new Float32Array(length));
  }

  write(buffer: DeviceBuffer, data: Float32Array, offset = 0): void {
    host(buffer).set(data, offset);
  }

  read(buffer: DeviceBuffer, offset = 0, length = buffer.length - offset): Float32Array {
    return host(buffer).slice(offset, offset + length);
  }

  readInto(buffer: DeviceBuffer, offset: number, length: number, target: Float32Array, targetOffset: number): void {
    target.set(host(buffer).subarray(offset, offset + length), targetOffset);
  }

  topKRows(ids: Int32Array, values: Float32Array, logits: DeviceBuffer, rows: number, columns: number, k: number): void {
    this.topK.rows(ids, values, host(logits), 0, rows, columns, k);
  }

  copy(out: DeviceBuffer, outOffset: number, source: DeviceBuffer, sourceOffset: number, length: number): void {
    host(out).set(host(source).subarray(sourceOffset, sourceOffset + length), outOffset);
  }

  embedding(out: DeviceBuffer, table: WeightHandle, tokens: Int32Array): void {
    const width = table.shape[0]!;
    const vocabulary = table.shape[1]!;
    const values = weightValues(table);
    const o = host(out);
    for (let r = 0; r < tokens.length; r++) {
      const token = tokens[r]!;
      if (token < 0 || token >= vocabulary) throw new RangeError(`token id ${token} at position ${r} is outside the vocabulary (0..${vocabulary - 1})`);
      o.set(values.subarray(token * width, (token + 1) * width), r * width);
    }
  }

  rmsNorm(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number, eps: number): void {
    const w = weightValues(weight);
    const width = w.length;
    const input = host(x);
    const o = host(out);
    for (let r = 0; r < rows; r++) {
      const base = r * width;
      let sum = 0;
      for (let i = 0; i < width; i++) sum += input[base + i]! * input[base + i]!;
      const scale = 1 / Math.sqrt(sum / width + eps);
      for (let i = 0; i < width; i++) o[base + i] = input[base + i]! * scale * w[i]!;
    }
  }

  matmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, rows: number): void {
    this.matmulAt(out, x, weight, 0, rows);
  }

  expertMatmul(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, expert: number, rows: number): void {
    this.matmulAt(out, x, weight, expert, rows);
  }

  /** out = x · W[matrix]ᵀ for matrix `matrix` of a 2-D (0) or 3-D weight. */
  private matmulAt(out: DeviceBuffer, x: DeviceBuffer, weight: WeightHandle, matrix: number, rows: number): void {
    const inFeatures = weight.shape[0]!;
    const outFeatures = weight.shape[1]!;
    const o = host(out);
    matmulRows(o, this.activations(x, weight, rows), weightValues(weight), matrix * inFeatures * outFeatures, inFeatures, outFeatures, rows);
    const offsets = (weight as ReferenceWeight).blockOffsets;
    if (!offsets || !this.ggmlActivationRounding) return;
    // q4_1 / q5_1: ggml multiplies each block's offset m with the activation block's own rounded sum.
    const blocks = inFeatures / 32;
    const corrections = new Float64Array(blocks);
    const source = host(x);
    for (let r = 0; r < rows; r++) {
      q8_1SumCorrections(source, r * inFeatures, inFeatures, corrections);
      for (let column = 0; column < outFeatures; column++) {
        const base = (matrix * outFeatures + column) * blocks;
        let correction = 0;
        for (let b = 0; b < blocks; b++) correction += offsets[base + b]! * corrections[b]!;
        o[r * outFeatures + column] = o[r * outFeatures + column]! + correction;
      }
    }
  }

  /** The rows of x as the dot products with `weight` see them (rounded like ggml, or as they are). */
  private activations(x: DeviceBuffer, weight: WeightHandle, rows: number): Float32Array {
    const rounding = this.ggmlActivationRounding ? activationRoundingFor(weight.type) : "none";
    if (rounding === "none") return host(x);
    const inFeatures = weight.shape[0]!;
    if (this.rounded.length < rows * inFeatures) this.rounded = new Float32Array(rows * inFeatures);
    const source = host(x);
    for (let r = 0; r < rows; r++) roundActivations(rounding, source, r * inFeatures, inFeatures, this.rounded.subarray(r * inFeatures));
    return this.rounded;
  }

  ropeNeox(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number): void {
    rotateNeox(host(x), positions, heads, headDim, freqBase, undefined);
  }

  ropeNeoxScaled(x: DeviceBuffer, positions: Int32Array, heads: number, headDim: number, freqBase: number, scaling: RopeScaling): void {
    rotateNeox(host(x), positions, heads, headDim, freqBase, scaling);
  }


  allocateKV(type: KVType, rows: number, width: number): KVStorage {
    if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`KV rows must be a non-negative integer, got ${rows}`);
    if (type === "q8_0" && width % 32 !== 0) throw new RangeError(`q8_0 KV rows need a width that is a multiple of 32, got ${width}`);
    return new HostKVStorage(type, rows, width);
  }

  writeKV(storage: KVStorage, slots: Int32Array, source: DeviceBuffer): void {
    const kv = hostKV(storage);
    const x = host(source);
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      if (!Number.isInteger(slot) || slot < 0 || slot >= kv.rows) throw new RangeError(`KV slot ${slot} outside [0, ${kv.rows})`);
      const row = x.subarray(i * kv.width, (i + 1) * kv.width);
      const encoded = kv.type === "f32" ? new Uint8Array(row.slice().buffer) : quantize(KV_GGML_TYPES[kv.type], row);
      kv.bytes.set(encoded, slot * kv.rowBytes);
    }
  }

  rotateKV(storage: KVStorage, slots: Int32Array, delta: number, heads: number, headDim: number, freqBase: number, scaling?: RopeScaling): void {
    const kv = hostKV(storage);
    if (heads * headDim !== kv.width) throw new RangeError(`rotateKV: ${heads} heads of ${headDim} are not the storage's rows of ${kv.width}`);
    const rows = new Float32Array(slots.length * kv.width);
    slots.forEach((slot, i) => {
      if (!Number.isInteger(slot) || slot < 0 || slot >= kv.rows) throw new RangeError(`KV slot ${slot} outside [0, ${kv.rows})`);
      const stored = kv.bytes.subarray(slot * kv.rowBytes, (slot + 1) * kv.rowBytes);
      if (kv.type === "f32") rows.set(new Float32Array(stored.slice().buffer), i * kv.width);
      else dequantize(KV_GGML_TYPES[kv.type], stored, kv.width, rows.subarray(i * kv.width, (i + 1) * kv.width));
    });
    rotateNeox(rows, new Int32Array(slots.length).fill(delta), heads, headDim, freqBase, scaling);
    this.writeKV(storage, slots, new HostBuffer(rows));
  }

  copyKV(storage: KVStorage, targetSlot: number, sourceSlot: number, rows: number): void {
    const kv = hostKV(storage);
    if (sourceSlot < 0 || targetSlot < 0 || sourceSlot + rows > kv.rows || targetSlot + rows > kv.rows) throw new RangeError("copyKV outside the storage");
    kv.bytes.copyWithin(targetSlot * kv.rowBytes, sourceSlot * kv.rowBytes, (sourceSlot + rows) * kv.rowBytes);
  }

  readKVRows(storage: KVStorage, firstSlot: number, rows: number): Uint8Array {
    const kv = hostKV(storage);
    return readHostKVRows(kv, kv.bytes, firstSlot, rows);
  }

  writeKVRows(storage: KVStorage, firstSlot: number, bytes: Uint8Array): void {
    const kv = hostKV(storage);
    writeHostKVRows(kv, kv.bytes, firstSlot, bytes);
  }

  /** Per sequence: gathers its visible K/V rows through the block table as f32, then plain causal attention. */
  attention(out: DeviceBuffer, q: DeviceBuffer, kv: KVLayerView, shape: AttentionShape): void {
    const { heads, kvHeads, headDim, scale } = shape;
    const query = host(q);
    const o = host(out);
    const keyStorage = hostKV(kv.keys);
    const valueStorage = hostKV(kv.values);
    const groupSize = heads / kvHeads;
    const kvWidth = kvHeads * headDim;
    const accumulator = new Float64Array(headDim);
    const sequenceCount = kv.sequences.length / 4;
    for (let sequence = 0; sequence < sequenceCount; sequence++) {
      const [queryStart, rows, position, tableStart] = Array.from(kv.sequences.subarray(sequence * 4, sequence * 4 + 4)) as [number, number, number, number];
      const visibleAll = position + rows;
      const keys = new Float32Array(visibleAll * kvWidth);
      const values = new Float32Array(visibleAll * kvWidth);
      for (let t = 0; t < visibleAll; t++) {
        const block = kv.blockTables[tableStart + Math.floor(t / kv.blockTokens)]!;
        const slot = block * kv.blockTokens + (t % kv.blockTokens);
        keyStorage.readRow(slot, keys.subarray(t * kvWidth, (t + 1) * kvWidth));
        valueStorage.readRow(slot, values.subarray(t * kvWidth, (t + 1) * kvWidth));
      }
      const scores = new Float64Array(visibleAll);
      for (let r = 0; r < rows; r++) {
        const visible = position + r + 1;
        for (let h = 0; h < heads; h++) {
          const kvHead = Math.floor(h / groupSize);
          const qBase = ((queryStart + r) * heads + h) * headDim;
          let max = -Infinity;
          for (let t = 0; t < visible; t++) {
            const kBase = t * kvWidth + kvHead * headDim;
            let dot = 0;
            for (let d = 0; d < headDim; d++) dot += query[qBase + d]! * keys[kBase + d]!;
            const score = dot * scale;
            scores[t] = score;
            if (score > max) max = score;
          }
          let sum = 0;
          for (let t = 0; t < visible; t++) {
            const e = Math.exp(scores[t]! - max);
            scores[t] = e;
            sum += e;
          }
          accumulator.fill(0);
          for (let t = 0; t < visible; t++) {
            const p = scores[t]! / sum;
            const vBase = t * kvWidth + kvHead * headDim;
            for (let d = 0; d < headDim; d++) accumulator[d] = accumulator[d]! + p * values[vBase + d]!;
          }
          for (let d = 0; d < headDim; d++) o[qBase + d] = accumulator[d]!;
        }
      }
    }
  }

  swiglu(out: DeviceBuffer, gate: DeviceBuffer, up: DeviceBuffer, length: number): void {
    const g = host(gate);
    const u = host(up);
    const o = host(out);
    for (let i = 0; i < length; i++) {
      const v = g[i]!;
      o[i] = (v / (1 + Math.exp(-v))) * u[i]!;
    }
  }

  add(out: DeviceBuffer, a: DeviceBuffer, b: DeviceBuffer, length: number): void {
    const x = host(a);
    const y = host(b);
    const o = host(out);
    for (let i = 0; i < length; i++) o[i] = x[i]! + y[i]!;
  }

  moeRoute(logits: DeviceBuffer, rows: number, experts: number, k: number): { ids: Int32Array; weights: Float32Array } {
    return routeTopK(host(logits), rows, experts, k);
  }

  gatherRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, width: number): void {
    const source = host(x);
    const o = host(out);
    for (let i = 0; i < rows.length; i++) o.set(source.subarray(rows[i]! * width, (rows[i]! + 1) * width), i * width);
  }

  scatterAddRows(out: DeviceBuffer, x: DeviceBuffer, rows: Int32Array, scales: Float32Array, width: number): void {
    const source = host(x);
    const o = host(out);
    for (let i = 0; i < rows.length; i++) {
      const target = rows[i]! * width;
      const scale = scales[i]!;
      for (let c = 0; c < width; c++) o[target + c] = o[target + c]! + scale * source[i * width + c]!;
    }
  }

  dispose(): void {}
}

/**
 * out[r, o] = Σ_i x[r, i] · W[offset + o · in + i], each sum in double precision over i in order.
 * Tiles of 4 rows × 4 outputs share every weight and activation they load: a prefill's LM head
 * (151,936 weight rows) is read once per 4 rows instead of once per row, about twice as fast under
 * Bun. The tiles change no sum's order, so the results are those of one dot product at a time, bit
 * for bit; rows and outputs left over take the plain loops.
 */
function matmulRows(out: Float32Array, x: Float32Array, w: Float32Array, offset: number, inFeatures: number, outFeatures: number, rows: number): void {
  let r = 0;
  for (; r + 4 <= rows; r += 4) matmulFourRows(out, x, w, offset, inFeatures, outFeatures, r);
  for (; r < rows; r++) matmulRow(out, x, w, offset, inFeatures, outFeatures, r);
}

/** Rows r .. r + 3 of matmulRows, four outputs at a time. */
function matmulFourRows(out: Float32Array, x: Float32Array, w: Float32Array, offset: number, inFeatures: number, outFeatures: number, r: number): void {
  const x0 = r * inFeatures;
  const x1 = x0 + inFeatures;
  const x2 = x1 + inFeatures;
  const x3 = x2 + inFeatures;
  const o0 = r * outFeatures;
  const o1 = o0 + outFeatures;
  const o2 = o1 + outFeatures;
  const o3 = o2 + outFeatures;
  let o = 0;
  for (; o + 4 <= outFeatures; o += 4) {
    const w0 = offset + o * inFeatures;
    const w1 = w0 + inFeatures;
    const w2 = w1 + inFeatures;
    const w3 = w2 + inFeatures;
    // s<i><j>: row r + i, output o + j
    let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
    let s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
    for (let i = 0; i < inFeatures; i++) {
      const v0 = w[w0 + i]!;
      const v1 = w[w1 + i]!;
      const v2 = w[w2 + i]!;
      const v3 = w[w3 + i]!;
      let a = x[x0 + i]!;
      s00 += a * v0; s01 += a * v1; s02 += a * v2; s03 += a * v3;
      a = x[x1 + i]!;
      s10 += a * v0; s11 += a * v1; s12 += a * v2; s13 += a * v3;
      a = x[x2 + i]!;
      s20 += a * v0; s21 += a * v1; s22 += a * v2; s23 += a * v3;
      a = x[x3 + i]!;
      s30 += a * v0; s31 += a * v1; s32 += a * v2; s33 += a * v3;
    }
    out[o0 + o] = s00; out[o0 + o + 1] = s01; out[o0 + o + 2] = s02; out[o0 + o + 3] = s03;
    out[o1 + o] = s10; out[o1 + o + 1] = s11; out[o1 + o + 2] = s12; out[o1 + o + 3] = s13;
    out[o2 + o] = s20; out[o2 + o + 1] = s21; out[o2 + o + 2] = s22; out[o2 + o + 3] = s23;
    out[o3 + o] = s30; out[o3 + o + 1] = s31; out[o3 + o + 2] = s32; out[o3 + o + 3] = s33;
  }
  for (; o < outFeatures; o++) {
    const w0 = offset + o * inFeatures;
    out[o0 + o] = dot(x, x0, w, w0, inFeatures);
    out[o1 + o] = dot(x, x1, w, w0, inFeatures);
    out[o2 + o] = dot(x, x2, w, w0, inFeatures);
    out[o3 + o] = dot(x, x3, w, w0, inFeatures);
  }
}

/** Row r of matmulRows, four outputs at a time. */
function matmulRow(out: Float32Array, x: Float32Array, w: Float32Array, offset: number, inFeatures: number, outFeatures: number, r: number): void {
  const xBase = r * inFeatures;
  const oBase = r * outFeatures;
  let o = 0;
  for (; o + 4 <= outFeatures; o += 4) {
    const w0 = offset + o * inFeatures;
    const w1 = w0 + inFeatures;
    const w2 = w1 + inFeatures;
    const w3 = w2 + inFeatures;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    for (let i = 0; i < inFeatures; i++) {
      const xi = x[xBase + i]!;
      s0 += xi * w[w0 + i]!;
      s1 += xi * w[w1 + i]!;
      s2 += xi * w[w2 + i]!;
      s3 += xi * w[w3 + i]!;
    }
    out[oBase + o] = s0;
    out[oBase + o + 1] = s1;
    out[oBase + o + 2] = s2;
    out[oBase + o + 3] = s3;
  }
  for (; o < outFeatures; o++) out[oBase + o] = dot(x, xBase, w, offset + o * inFeatures, inFeatures);
}

/** Σ_i x[xBase + i] · w[wBase + i] over i < length, in double precision and in order. */
function dot(x: Float32Array, xBase: number, w: Float32Array, wBase: number, length: number): number {
  let s = 0;
  for (let i = 0; i < length; i++) s += x[xBase + i]! * w[wBase + i]!;
  return s;
}

/**
 * Qwen3-MoE routing as llama.cpp does it: softmax over all experts, the k largest probabilities
 * (ties to the lower id), weights renormalised to sum to one.
 */
export function routeTopK(logits: Float32Array, rows: number, experts: number, k: number): { ids: Int32Array; weights: Float32Array } {
  const ids = new Int32Array(rows * k);
  const weights = new Float32Array(rows * k);
  const probabilities = new Float64Array(experts);
  for (let r = 0; r < rows; r++) {
    const base = r * experts;
    let max = -Infinity;
    for (let e = 0; e < experts; e++) max = Math.max(max, logits[base + e]!);
    let sum = 0;
    for (let e = 0; e < experts; e++) {
      probabilities[e] = Math.exp(logits[base + e]! - max);
      sum += probabilities[e]!;
    }
    for (let e = 0; e < experts; e++) probabilities[e] = probabilities[e]! / sum;
    const taken = new Uint8Array(experts);
    let selectedSum = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < experts; e++) if (!taken[e] && (best < 0 || probabilities[e]! > probabilities[best]!)) best = e;
      taken[best] = 1;
      ids[r * k + j] = best;
      selectedSum += probabilities[best]!;
    }
    for (let j = 0; j < k; j++) weights[r * k + j] = probabilities[ids[r * k + j]!]! / selectedSum;
  }
  return { ids, weights };
}
