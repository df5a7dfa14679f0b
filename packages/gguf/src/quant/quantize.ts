/**
 * Reference quantization: float32 values -> raw ggml tensor bytes, following ggml's
 * `quantize_row_*_ref` (the path `ggml_quantize_chunk` takes without an importance matrix; for
 * iq4_nl, iq4_xs and iq3_s its `quantize_iq4_*` / `quantize_iq3_s`, which search scales where the
 * _ref functions do not) and
 * `ggml_fp32_to_fp16_row` / `ggml_fp32_to_bf16_row_ref`.
 */
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { blockCountOf } from "./block-count";
import { f32BitsToBf16Bits, f32BitsToF16Bits } from "./half";
import { quantizeQ4_0, quantizeQ4_1, quantizeQ5_0, quantizeQ5_1, quantizeQ8_0 } from "./quantize-blocks-32";
import { quantizeIQ3_S } from "./quantize-iq3";
import { quantizeIQ4_NL, quantizeIQ4_XS } from "./quantize-iq4";
import { quantizeQ2_K, quantizeQ3_K, quantizeQ4_K, quantizeQ5_K, quantizeQ6_K } from "./quantize-k";
import { UnsupportedTypeError } from "./unsupported-type-error";

/** Quantizes `count` blocks (or elements) of `x` into the zero-filled `out`. */
type Quantizer = (x: Float32Array, out: Uint8Array, count: number) => void;

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
]);

/** Whether `quantize` implements `type`. */
export function canQuantize(type: GGMLType | number): boolean {
  return QUANTIZERS.has(type);
}

/**
 * Quantizes `values` (a whole number of blocks) to `type` and returns the tensor bytes, laid out as
 * ggml stores them (little-endian).
 *
 * @throws UnsupportedTypeError for a type `canQuantize` rejects.
 * @throws RangeError when `values.length` is not a multiple of the type's block size.
 */
export function quantize(type: GGMLType | number, values: Float32Array): Uint8Array {
  const quantizer = QUANTIZERS.get(type);
  const info = ggmlTypeInfo(type);
  if (quantizer === undefined || info === undefined) throw new UnsupportedTypeError("quantize", type);
  const blockCount = blockCountOf(info, values.length, "quantize");
  const out = new Uint8Array(blockCount * info.bytesPerBlock);
  quantizer(values, out, blockCount);
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
