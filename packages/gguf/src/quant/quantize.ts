/**
 * Reference quantization: float32 values -> raw ggml tensor bytes, as `ggml_quantize_chunk` writes
 * them. Without an importance matrix that is ggml's `quantize_row_*_ref` (for iq4_nl, iq4_xs, iq3_s
 * and iq3_xxs its `quantize_iq4_*` / `quantize_iq3_*`, which search scales where the _ref functions do
 * not) and `ggml_fp32_to_fp16_row` / `ggml_fp32_to_bf16_row_ref`; with one (llama-quantize --imatrix)
 * the `quantize_row_*_impl` functions, row by row, weighing each value's error by its importance.
 */
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { blockCountOf } from "./block-count";
import { f32BitsToBf16Bits, f32BitsToF16Bits } from "./half";
import { quantizeQ4_0, quantizeQ4_1, quantizeQ5_0, quantizeQ5_1, quantizeQ8_0 } from "./quantize-blocks-32";
import { quantizeIQ1_M, quantizeIQ1_S } from "./quantize-iq1";
import { quantizeIQ2_S, quantizeIQ2_XS, quantizeIQ2_XXS } from "./quantize-iq2";
import { quantizeIQ3_S, quantizeIQ3_XXS } from "./quantize-iq3";
import { quantizeIQ4_NL, quantizeIQ4_XS } from "./quantize-iq4";
import { quantizeQ2_K, quantizeQ3_K, quantizeQ4_K, quantizeQ5_K, quantizeQ6_K } from "./quantize-k";
import { UnsupportedTypeError } from "./unsupported-type-error";

/**
 * Quantizes `count` blocks (or elements) of `x` into the zero-filled `out`. With `importance` (one
 * weight per value of x), x is one row: ggml's weighted quantizers take statistics over a row, or
 * ignore the weights (q8_0, f16, bf16, f32).
 */
type Quantizer = (x: Float32Array, out: Uint8Array, count: number, importance?: Float32Array) => void;

const QUANTIZERS: ReadonlyMap<GGMLType, Quantizer> = new Map<GGMLType, Quantizer>([
  [GGMLType.F32, copyF32],
  [GGMLType.F16, convertToF16],
  [GGMLType.BF16, convertToBF16],
  [GGMLType.Q4_0, quantizeQ4_0],
  [GGMLType.Q4_1, quantizeQ4_1],
  [GGMLType.Q5_0, quantizeQ5_0],
  [GGMLType.Q5_1, quantizeQ5_1],
  [GGMLType.Q8_0, quantizeQ8_0],
  [GGMLType.Q2_K, quantizeQ2_K],
  [GGMLType.Q3_K, quantizeQ3_K],
  [GGMLType.Q4_K, quantizeQ4_K],
  [GGMLType.Q5_K, quantizeQ5_K],
  [GGMLType.Q6_K, quantizeQ6_K],
  [GGMLType.IQ4_NL, quantizeIQ4_NL],
  [GGMLType.IQ4_XS, quantizeIQ4_XS],
  [GGMLType.IQ3_S, quantizeIQ3_S],
  [GGMLType.IQ3_XXS, quantizeIQ3_XXS],
  [GGMLType.IQ2_XXS, oneRow(quantizeIQ2_XXS)],
  [GGMLType.IQ2_XS, oneRow(quantizeIQ2_XS)],
  [GGMLType.IQ2_S, oneRow(quantizeIQ2_S)],
  [GGMLType.IQ1_S, oneRow(quantizeIQ1_S)],
  [GGMLType.IQ1_M, oneRow(quantizeIQ1_M)],
]);

/** A quantizer of rows of 256-value blocks (quantize-iq2.ts, quantize-iq1.ts) over one row of `count` blocks. */
function oneRow(quantizeRows: (x: Float32Array, out: Uint8Array, rows: number, rowLength: number, importance?: Float32Array) => void): Quantizer {
  return (x, out, count, importance) => quantizeRows(x, out, 1, count * 256, importance);
}

/** ggml_quantize_requires_imatrix: the types ggml quantizes only with an importance matrix. */
const IMPORTANCE_REQUIRED: ReadonlySet<GGMLType> = new Set([GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ1_S]);

/** Whether `quantize` implements `type`. */
export function canQuantize(type: GGMLType | number): boolean {
  return QUANTIZERS.has(type);
}

/**
 * Whether ggml quantizes `type` only with an importance matrix (ggml_quantize_requires_imatrix:
 * iq2_xxs, iq2_xs, iq1_s); `quantize` of such a type without `importance` throws.
 */
export function requiresImportance(type: GGMLType | number): boolean {
  return IMPORTANCE_REQUIRED.has(type);
}

/**
 * Quantizes `values` (a whole number of blocks) to `type` and returns the tensor bytes, laid out as
 * ggml stores them (little-endian).
 *
 * With `importance` (an importance matrix's entry for this tensor, or for one expert of it: one
 * weight per column), `values` is a whole number of rows of `importance.length` values, and the bytes
 * are `ggml_quantize_chunk(type, values, out, 0, rows, importance.length, importance)`'s.
 *
 * @throws UnsupportedTypeError for a type `canQuantize` rejects.
 * @throws RangeError when `values.length` is not a multiple of the type's block size, or with
 *   `importance` when its length is not a positive multiple of the block size or does not divide
 *   `values.length`.
 * @throws Error for a type that `requiresImportance`, without `importance`.
 */
export function quantize(type: GGMLType | number, values: Float32Array, importance?: Float32Array): Uint8Array {
  const quantizer = QUANTIZERS.get(type);
  const info = ggmlTypeInfo(type);
  if (quantizer === undefined || info === undefined) throw new UnsupportedTypeError("quantize", type);
  const blockCount = blockCountOf(info, values.length, "quantize");
  const out = new Uint8Array(blockCount * info.bytesPerBlock);
  if (importance === undefined) {
    if (requiresImportance(type)) throw new Error(`quantize: ${info.name} needs an importance matrix (ggml quantizes it only with one)`);
    quantizer(values, out, blockCount);
    return out;
  }
  const rowLength = importance.length;
  if (rowLength === 0 || rowLength % info.blockSize !== 0) {
    throw new RangeError(`quantize: importance has ${rowLength} values, not a positive multiple of the ${info.name} block size ${info.blockSize}`);
  }
  if (values.length % rowLength !== 0) {
    throw new RangeError(`quantize: ${values.length} values are not a whole number of rows of ${rowLength} (the importance's length)`);
  }
  const rowBlocks = rowLength / info.blockSize;
  const rowBytes = rowBlocks * info.bytesPerBlock;
  for (let row = 0; row < values.length / rowLength; row++) {
    const rowValues = values.subarray(row * rowLength, (row + 1) * rowLength);
    quantizer(rowValues, out.subarray(row * rowBytes, (row + 1) * rowBytes), rowBlocks, importance);
  }
  return out;
}

function copyF32(x: Float32Array, out: Uint8Array, count: number): void {
  const bits = new Uint32Array(x.buffer, x.byteOffset, count);
  for (let i = 0, o = 0; i < count; i++, o += 4) {
    const word = bits[i]!;
    out[o] = word & 0xff;
    out[o + 1] = (word >>> 8) & 0xff;
    out[o + 2] = (word >>> 16) & 0xff;
    out[o + 3] = word >>> 24;
  }
}

function convertToF16(x: Float32Array, out: Uint8Array, count: number): void {
  const bits = new Uint32Array(x.buffer, x.byteOffset, count);
  for (let i = 0, o = 0; i < count; i++, o += 2) {
    const h = f32BitsToF16Bits(bits[i]!);
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
  }
}

function convertToBF16(x: Float32Array, out: Uint8Array, count: number): void {
  const bits = new Uint32Array(x.buffer, x.byteOffset, count);
  for (let i = 0, o = 0; i < count; i++, o += 2) {
    const h = f32BitsToBf16Bits(bits[i]!);
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
  }
}
