/**
 * IEEE binary16 (f16) and bfloat16 (bf16) conversions with the exact bit-level behaviour of ggml's
 * reference converters (`ggml_compute_fp32_to_fp16`, `ggml_compute_fp16_to_fp32`,
 * `ggml_compute_fp32_to_bf16`, `ggml_compute_bf16_to_fp32`).
 *
 * Every "f32" argument is first rounded to binary32 (as storing it in a Float32Array would), so a
 * JavaScript double is treated as the float ggml would have been handed.
 */

const scratchFloat = new Float32Array(1);
const scratchBits = new Uint32Array(scratchFloat.buffer);

/** The binary32 bit pattern of `value` after rounding it to binary32. */
export function f32ToBits(value: number): number {
  scratchFloat[0] = value;
  return scratchBits[0]!;
}

/** The binary32 value whose bit pattern is `bits` (NaN payloads survive only while kept as bits). */
export function bitsToF32(bits: number): number {
  scratchBits[0] = bits;
  return scratchFloat[0]!;
}

/**
 * binary32 bit pattern for each of the 65536 f16 bit patterns. Signalling NaNs come out quiet
 * (payload shifted up by 13, quiet bit set), as x86 hardware and ggml's generic converter produce.
 */
export const F16_TO_F32_BITS: Uint32Array = buildF16Table();

/** The same table read as floats: `F16_TO_F32[h]` is the value of half bit pattern `h`. */
export const F16_TO_F32: Float32Array = new Float32Array(F16_TO_F32_BITS.buffer);

function buildF16Table(): Uint32Array {
  const table = new Uint32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exponent = (h >>> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    let bits: number;
    if (exponent === 0x1f) {
      bits = mantissa === 0 ? 0x7f800000 : 0x7fc00000 | (mantissa << 13);
    } else if (exponent !== 0) {
      bits = ((exponent + 112) << 23) | (mantissa << 13); // rebias 15 -> 127
    } else if (mantissa === 0) {
      bits = 0;
    } else {
      // Subnormal half: mantissa * 2^-24, normalised into a binary32 with an implicit leading one.
      let shift = 0;
      let m = mantissa;
      while ((m & 0x400) === 0) {
        m <<= 1;
        shift++;
      }
      bits = ((113 - shift) << 23) | ((m & 0x3ff) << 13);
    }
    table[h] = (sign | bits) >>> 0;
  }
  return table;
}

/** The value of the half whose bit pattern is `h` (0..65535). */
export function f16BitsToF32(h: number): number {
  return F16_TO_F32[h & 0xffff]!;
}

/**
 * binary32 bits -> binary16 bits, round to nearest, ties to even, with subnormal halves, overflow to
 * infinity from 65520 up, and every NaN becoming `sign | 0x7e00` (ggml drops the payload).
 */
export function f32BitsToF16Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00;
  if (magnitude >= 0x47800000) return sign | 0x7c00; // >= 65536 (and infinity)
  if (magnitude >= 0x38800000) {
    // Normal half range [2^-14, 65536): rebias the exponent, keep 10 mantissa bits, round the other 13.
    let half = (magnitude - 0x38000000) >>> 13;
    const rest = magnitude & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (half & 1) !== 0)) half++; // a carry may reach infinity
    return sign | half;
  }
  if (magnitude < 0x33000000) return sign; // below 2^-25 (half of the smallest subnormal): zero
  // Subnormal half: value / 2^-24, rounded to an integer, ties to even.
  const exponent = magnitude >>> 23;
  const mantissa = (magnitude & 0x7fffff) | 0x800000;
  const shift = 126 - exponent; // 14..24
  let half = mantissa >>> shift;
  const rest = mantissa & ((1 << shift) - 1);
  const midpoint = 1 << (shift - 1);
  if (rest > midpoint || (rest === midpoint && (half & 1) !== 0)) half++;
  return sign | half;
}

/** `value` rounded to binary32 then to binary16, as ggml's `GGML_FP32_TO_FP16`; returns the bits. */
export function f32ToF16Bits(value: number): number {
  scratchFloat[0] = value;
  return f32BitsToF16Bits(scratchBits[0]!);
}

/** `value` rounded through f16 and back: the float ggml gets from storing `value` as a half. */
export function roundToF16(value: number): number {
  return F16_TO_F32[f32ToF16Bits(value)]!;
}

/** The value of the bfloat16 whose bit pattern is `h`: its bits are the top half of a binary32. */
export function bf16BitsToF32(h: number): number {
  return bitsToF32((h & 0xffff) << 16);
}

/**
 * binary32 bits -> bfloat16 bits as `ggml_compute_fp32_to_bf16`: round to nearest, ties to even (a
 * carry may round up to infinity); a NaN keeps its top 16 bits and is forced quiet with bit 6.
 */
export function f32BitsToBf16Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff;
  return ((bits >>> 0) + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
}

/** `value` rounded to binary32 then to bfloat16, as ggml's `GGML_FP32_TO_BF16`; returns the bits. */
export function f32ToBf16Bits(value: number): number {
  scratchFloat[0] = value;
  return f32BitsToBf16Bits(scratchBits[0]!);
}
