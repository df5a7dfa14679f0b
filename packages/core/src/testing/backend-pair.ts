/**
 * The kit of the backend op tests (cpu-ffi, cuda-ffi): a pair of backends that run the same op on the
 * same inputs, seeded inputs, weights of every type, and the normalised mean squared error the tests
 * bound, NMSE = Σ(actual − expected)² / Σ expected².
 */
import { type GGUFTensorInfo, GGMLType, canMakeRandomBlocks, canQuantize, f32ToF16Bits, ggmlTypeInfo, ggmlTypeName, quantize, randomBlocks as randomIQBlocks } from "@memra/gguf";
import { mulberry32 } from "@memra/synthetic";
import type { Backend, DeviceBuffer, WeightHandle } from "../backend";

/** Every ggml type id, to ask a backend which it supports. */
export const ALL_GGML_TYPES: readonly GGMLType[] = Object.values(GGMLType).filter((value): value is GGMLType => typeof value === "number");

/** `count` normal samples (Box–Muller on mulberry32(seed)) times `scale`. */
export function normals(count: number, seed: number, scale = 1): Float32Array {
  const random = mulberry32(seed);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = scale * Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return out;
}

/** Σ(actual − expected)² / Σ expected² (the plain squared error when expected is all zeros). */
export function nmse(actual: Float32Array, expected: Float32Array): number {
  if (actual.length !== expected.length) throw new RangeError(`nmse: ${actual.length} values against ${expected.length}`);
  let error = 0;
  let energy = 0;
  for (let i = 0; i < expected.length; i++) {
    const d = actual[i]! - expected[i]!;
    error += d * d;
    energy += expected[i]! * expected[i]!;
  }
  return energy === 0 ? error : error / energy;
}

/** The first index where two arrays differ bit for bit (-1: identical; the shorter length when the lengths differ); cheap to report when a test fails. */
export function firstDifference(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return i;
  return -1;
}

/** A tensor info for `data` of `type` and ggml `shape` (fastest dimension first), at offset 0. */
/**
 * The batch layout of paged attention (KVLayerView's sequences and block tables) for sequences of
 * (query rows, cache position of the first) in order: each sequence's blocks from `pickBlock`.
 */
export function pagedLayout(
  shapes: readonly (readonly [number, number])[],
  blockTokens: number,
  pickBlock: () => number,
): { rows: number; sequences: Int32Array; blockTables: Int32Array } {
  const sequences = new Int32Array(shapes.length * 4);
  const tables: number[] = [];
  let rows = 0;
  for (let i = 0; i < shapes.length; i++) {
    const [queryRows, position] = shapes[i]!;
    sequences.set([rows, queryRows, position, tables.length], i * 4);
    for (let b = 0; b < Math.ceil((position + queryRows) / blockTokens); b++) tables.push(pickBlock());
    rows += queryRows;
  }
  return { rows, sequences, blockTables: Int32Array.from(tables) };
}

export function tensorInfo(name: string, type: GGMLType, shape: number[], data: Uint8Array): GGUFTensorInfo {
  return { name, type, shape, elementCount: shape.reduce((a, b) => a * b, 1), offset: 0, byteSize: data.byteLength };
}

/** Random valid blocks for a type `quantize` cannot produce (iq4_nl, iq4_xs): random bytes, sane f16 scale. */
function randomBlocks(type: GGMLType, elementCount: number, seed: number): Uint8Array {
  const info = ggmlTypeInfo(type)!;
  const blocks = elementCount / info.blockSize;
  const random = mulberry32(seed);
  const bytes = new Uint8Array(blocks * info.bytesPerBlock);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  for (let b = 0; b < blocks; b++) {
    const d = f32ToF16Bits(0.001 + 0.002 * random());
    bytes[b * info.bytesPerBlock] = d & 0xff;
    bytes[b * info.bytesPerBlock + 1] = d >>> 8;
  }
  return bytes;
}

/**
 * `values` as weights of `type`: quantized (iq3_s too); for the other i-quants below 4 bits random
 * valid blocks with the RMS of `values` (their quantizers want an importance matrix, and the grid
 * searches are slow in TypeScript); random valid blocks for a type neither covers.
 */
export function weightBytes(type: GGMLType, values: Float32Array, seed: number): Uint8Array {
  const randomIQ = canMakeRandomBlocks(type) && type !== GGMLType.IQ3_S;
  if (canQuantize(type) && !randomIQ) return quantize(type, values);
  if (!randomIQ && (type === GGMLType.IQ4_NL || type === GGMLType.IQ4_XS)) return randomBlocks(type, values.length, seed);
  if (randomIQ) {
    let sum = 0;
    for (const value of values) sum += value * value;
    return randomIQBlocks(type, values.length, seed, Math.sqrt(sum / Math.max(1, values.length)) || 1);
  }
  throw new Error(`a backend supports ${ggmlTypeName(type)}, but the op tests cannot build weights of that type: add a way`);
}

/** Runs the same op on a backend under test and on the reference, with the same inputs. */
export class BackendPair {
  constructor(
    readonly native: Backend,
    readonly reference: Backend,
  ) {}

  buffers(values: Float32Array): [DeviceBuffer, DeviceBuffer] {
    const a = this.native.allocate(values.length);
    const b = this.reference.allocate(values.length);
    this.native.write(a, values);
    this.reference.write(b, values);
    return [a, b];
  }

  weights(info: GGUFTensorInfo, data: Uint8Array): [WeightHandle, WeightHandle] {
    return [this.native.uploadWeight(info, data), this.reference.uploadWeight(info, data)];
  }

  read(buffers: [DeviceBuffer, DeviceBuffer]): [Float32Array, Float32Array] {
    return [this.native.read(buffers[0]), this.reference.read(buffers[1])];
  }
}
