/**
 * Reference dequantization: raw ggml tensor bytes -> float32, bit-exact with ggml's
 * `dequantize_row_*` / `ggml_*_to_fp32_row` for the supported types.
 */
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { blockCountOf } from "./block-count";
import {
  dequantizeIQ4_NL,
  dequantizeQ4_0,
  dequantizeQ4_1,
  dequantizeQ5_0,
  dequantizeQ5_1,
  dequantizeQ8_0,
} from "./dequantize-blocks-32";
import {
  dequantizeIQ4_XS,
  dequantizeQ2_K,
  dequantizeQ3_K,
  dequantizeQ4_K,
  dequantizeQ5_K,
  dequantizeQ6_K,
} from "./dequantize-k";
import { dequantizeIQ1_M, dequantizeIQ1_S, dequantizeIQ2_S, dequantizeIQ2_XS, dequantizeIQ2_XXS, dequantizeIQ3_S, dequantizeIQ3_XXS } from "./dequantize-iq";
import { F16_TO_F32_BITS } from "./half";
import { UnsupportedTypeError } from "./unsupported-type-error";

/** Reads `count` elements (or blocks) from the start of `src` into the start of `out`. */
type Kernel = (src: Uint8Array, out: Float32Array, count: number) => void;

const IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const KERNELS: ReadonlyMap<GGMLType, Kernel> = new Map<GGMLType, Kernel>([
  [GGMLType.F32, copyF32],
  [GGMLType.F16, convertF16],
  [GGMLType.BF16, convertBF16],
  [GGMLType.F64, convertF64],
  [GGMLType.I8, convertI8],
  [GGMLType.I16, convertI16],
  [GGMLType.I32, convertI32],
  [GGMLType.Q4_0, dequantizeQ4_0],
  [GGMLType.Q4_1, dequantizeQ4_1],
  [GGMLType.Q5_0, dequantizeQ5_0],
  [GGMLType.Q5_1, dequantizeQ5_1],
  [GGMLType.Q8_0, dequantizeQ8_0],
  [GGMLType.Q2_K, dequantizeQ2_K],
  [GGMLType.Q3_K, dequantizeQ3_K],
  [GGMLType.Q4_K, dequantizeQ4_K],
  [GGMLType.Q5_K, dequantizeQ5_K],
  [GGMLType.Q6_K, dequantizeQ6_K],
  [GGMLType.IQ4_NL, dequantizeIQ4_NL],
  [GGMLType.IQ4_XS, dequantizeIQ4_XS],
  [GGMLType.IQ2_XXS, dequantizeIQ2_XXS],
  [GGMLType.IQ2_XS, dequantizeIQ2_XS],
  [GGMLType.IQ2_S, dequantizeIQ2_S],
  [GGMLType.IQ3_XXS, dequantizeIQ3_XXS],
  [GGMLType.IQ3_S, dequantizeIQ3_S],
  [GGMLType.IQ1_S, dequantizeIQ1_S],
  [GGMLType.IQ1_M, dequantizeIQ1_M],
]);

/** Whether `dequantize` implements `type`. */
export function canDequantize(type: GGMLType | number): boolean {
  return KERNELS.has(type);
}

/**
 * Converts `elementCount` elements of a tensor of `type`, stored little-endian in `data` (any
 * byteOffset; extra trailing bytes are ignored), to float32. Writes into `out` when given (its first
 * `elementCount` entries) and returns it, otherwise returns a new Float32Array.
 *
 * @throws UnsupportedTypeError for a type `canDequantize` rejects.
 * @throws RangeError when `elementCount` is not a non-negative whole multiple of the type's block
 *   size, when `data` is shorter than that many elements need, or when `out` is too short.
 */
export function dequantize(
  type: GGMLType | number,
  data: Uint8Array,
  elementCount: number,
  out?: Float32Array,
): Float32Array {
  const kernel = KERNELS.get(type);
  const info = ggmlTypeInfo(type);
  if (kernel === undefined || info === undefined) throw new UnsupportedTypeError("dequantize", type);
  const blockCount = blockCountOf(info, elementCount, "dequantize");
  const byteCount = blockCount * info.bytesPerBlock;
  if (data.length < byteCount) {
    throw new RangeError(
      `dequantize: ${elementCount} ${info.name} elements need ${byteCount} bytes, but data has ${data.length}`,
    );
  }
  let target: Float32Array;
  if (out === undefined) {
    target = new Float32Array(elementCount);
  } else {
    if (out.length < elementCount) {
      throw new RangeError(`dequantize: out has ${out.length} floats, but ${elementCount} are needed`);
    }
    target = out;
  }
  kernel(data.subarray(0, byteCount), target, blockCount);
  return target;
}

/** Bytes of `out` as a byte array, for bit-exact copies. */
function outputBytes(out: Float32Array, count: number): Uint8Array {
  return new Uint8Array(out.buffer, out.byteOffset, count * 4);
}

function copyF32(src: Uint8Array, out: Float32Array, count: number): void {
  if (IS_LITTLE_ENDIAN) {
    outputBytes(out, count).set(src.subarray(0, count * 4)); // keeps NaN payloads, any alignment
    return;
  }
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
}

function convertF16(src: Uint8Array, out: Float32Array, count: number): void {
  // Write bit patterns so that NaN payloads come out exactly as ggml's converter gives them.
  const table = F16_TO_F32_BITS;
  const bits = new Uint32Array(out.buffer, out.byteOffset, count);
  if (IS_LITTLE_ENDIAN && src.byteOffset % 2 === 0) {
    const halves = new Uint16Array(src.buffer, src.byteOffset, count);
    for (let i = 0; i < count; i++) bits[i] = table[halves[i]!]!;
  } else {
    for (let i = 0, s = 0; i < count; i++, s += 2) bits[i] = table[src[s]! | (src[s + 1]! << 8)]!;
  }
}

function convertBF16(src: Uint8Array, out: Float32Array, count: number): void {
  const bits = new Uint32Array(out.buffer, out.byteOffset, count);
  if (IS_LITTLE_ENDIAN && src.byteOffset % 2 === 0) {
    const halves = new Uint16Array(src.buffer, src.byteOffset, count);
    for (let i = 0; i < count; i++) bits[i] = halves[i]! << 16;
  } else {
    for (let i = 0, s = 0; i < count; i++, s += 2) bits[i] = (src[s]! << 16) | (src[s + 1]! << 24);
  }
}

function convertF64(src: Uint8Array, out: Float32Array, count: number): void {
  if (IS_LITTLE_ENDIAN && src.byteOffset % 8 === 0) {
    const values = new Float64Array(src.buffer, src.byteOffset, count);
    for (let i = 0; i < count; i++) out[i] = values[i]!; // round to nearest, as a C cast
    return;
  }
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  for (let i = 0; i < count; i++) out[i] = view.getFloat64(i * 8, true);
}

function convertI8(src: Uint8Array, out: Float32Array, count: number): void {
  for (let i = 0; i < count; i++) out[i] = (src[i]! << 24) >> 24;
}

function convertI16(src: Uint8Array, out: Float32Array, count: number): void {
  for (let i = 0, s = 0; i < count; i++, s += 2) out[i] = ((src[s]! | (src[s + 1]! << 8)) << 16) >> 16;
}

function convertI32(src: Uint8Array, out: Float32Array, count: number): void {
  // An int32 beyond 2^24 rounds to the nearest float, as the C conversion does.
  for (let i = 0, s = 0; i < count; i++, s += 4) {
    out[i] = src[s]! | (src[s + 1]! << 8) | (src[s + 2]! << 16) | (src[s + 3]! << 24);
  }
}
