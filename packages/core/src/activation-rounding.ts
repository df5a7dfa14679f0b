/**
 * ggml's CPU matmul does not multiply a quantized (or f16/bf16) weight with f32 activations: it
 * first converts each activation row to the weight type's "vec_dot_type" (ggml-cpu.c
 * type_traits_cpu) and takes the dot product in that form. These functions apply the same
 * rounding to a row, so that a backend computing with f32 arithmetic over the rounded values gets
 * what llama.cpp gets, up to summation order:
 *
 *   q4_0, q5_0, q8_0, iq4_nl → q8_0   per 32 values: d = max|x| / 127 stored as f16, q = round_even(x · 127 / max|x|)
 *   q4_1, q5_1              → q8_1   the same values as q8_0, plus s = f16(d · Σq) per block, which ggml
 *                                    multiplies with the weight block's offset m (see q8_1SumCorrections)
 *   q2_K … q6_K, iq4_xs,    → q8_K
 *   iq1_*, iq2_*, iq3_*   per 256 values: iscale = −127 / x_maxabs, q = min(127, round_even(iscale · x)), d = 1 / iscale (f32)
 *   f16 → f16, bf16 → bf16 (round to nearest even); f32 → unchanged
 */
import { GGMLType, f32ToBf16Bits, bf16BitsToF32, roundToF16 } from "@memra/gguf";

export type ActivationRounding = "none" | "q8_0" | "q8_K" | "f16" | "bf16";

/** The rounding ggml applies to activations multiplied with weights of `type`. */
export function activationRoundingFor(type: GGMLType): ActivationRounding {
  switch (type) {
    case GGMLType.Q4_0:
    case GGMLType.Q4_1:
    case GGMLType.Q5_0:
    case GGMLType.Q5_1:
    case GGMLType.Q8_0:
    case GGMLType.IQ4_NL:
      return "q8_0";
    case GGMLType.Q2_K:
    case GGMLType.Q3_K:
    case GGMLType.Q4_K:
    case GGMLType.Q5_K:
    case GGMLType.Q6_K:
    case GGMLType.IQ4_XS:
    case GGMLType.IQ2_XXS:
    case GGMLType.IQ2_XS:
    case GGMLType.IQ2_S:
    case GGMLType.IQ3_XXS:
    case GGMLType.IQ3_S:
    case GGMLType.IQ1_S:
    case GGMLType.IQ1_M:
      return "q8_K";
    case GGMLType.F16:
      return "f16";
    case GGMLType.BF16:
      return "bf16";
    default:
      return "none";
  }
}

/** ties-to-even rounding of an f32 value, like ggml's nearest_int and _mm256_round_ps(NEAREST). */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const difference = value - floor;
  if (difference > 0.5) return floor + 1;
  if (difference < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Writes `source[offset, offset + length)` rounded as `rounding` into `out[0, length)`. */
export function roundActivations(rounding: ActivationRounding, source: Float32Array, offset: number, length: number, out: Float32Array): void {
  switch (rounding) {
    case "none":
      out.set(source.subarray(offset, offset + length));
      return;
    case "f16":
      for (let i = 0; i < length; i++) out[i] = roundToF16(source[offset + i]!);
      return;
    case "bf16":
      for (let i = 0; i < length; i++) out[i] = bf16BitsToF32(f32ToBf16Bits(source[offset + i]!));
      return;
    case "q8_0":
      for (let block = 0; block < length; block += 32) {
        let max = 0;
        for (let i = 0; i < 32; i++) max = Math.max(max, Math.abs(source[offset + block + i]!));
        const d = roundToF16(Math.fround(max / 127));
        const inverse = max !== 0 ? Math.fround(127 / max) : 0;
        for (let i = 0; i < 32; i++) out[block + i] = d * roundHalfEven(Math.fround(source[offset + block + i]! * inverse));
      }
      return;
    case "q8_K":
      for (let block = 0; block < length; block += 256) {
        let max = 0;
        let maxAbsolute = 0;
        for (let i = 0; i < 256; i++) {
          const value = source[offset + block + i]!;
          if (Math.abs(value) > maxAbsolute) {
            maxAbsolute = Math.abs(value);
            max = value;
          }
        }
        if (maxAbsolute === 0) {
          out.fill(0, block, block + 256);
          continue;
        }
        const inverseScale = Math.fround(-127 / max);
        const d = Math.fround(1 / inverseScale);
        for (let i = 0; i < 256; i++) {
          const q = Math.min(127, roundHalfEven(Math.fround(inverseScale * source[offset + block + i]!)));
          out[block + i] = Math.fround(d * q);
        }
      }
      return;
  }
}

/**
 * For q4_1 / q5_1 weights (w = d_w · q_w + m_w), ggml's dot product per block is
 * d_w · d_a · Σ q_w q_a + m_w · s_a, where s_a = f16(d_a · Σ q_a) is rounded on its own. A dot product
 * over the dequantized values gives m_w · Σ a instead; this writes, per 32-value block of the row,
 * s_a − Σ a, so that adding m_w times it reproduces ggml. `out` gets length / 32 entries.
 */
export function q8_1SumCorrections(source: Float32Array, offset: number, length: number, out: Float64Array): void {
  for (let block = 0; block < length; block += 32) {
    let max = 0;
    for (let i = 0; i < 32; i++) max = Math.max(max, Math.abs(source[offset + block + i]!));
    const d = Math.fround(max / 127);
    const d16 = roundToF16(d);
    const inverse = max !== 0 ? Math.fround(127 / max) : 0;
    let sum = 0;
    for (let i = 0; i < 32; i++) sum += roundHalfEven(Math.fround(source[offset + block + i]! * inverse));
    out[block / 32] = roundToF16(Math.fround(d * sum)) - d16 * sum;
  }
}
