/** Reference quantization and dequantization of ggml tensor data, bit-exact with ggml's reference code. */
export { canDequantize, dequantize } from "./dequantize";
export { canQuantize, quantize, requiresImportance } from "./quantize";
export { canMakeRandomBlocks, randomBlocks, setBlockScale } from "./random-blocks";
export { UnsupportedTypeError } from "./unsupported-type-error";
export { IQ4_NL_VALUES } from "./iq4-nl-values";
export {
  F16_TO_F32,
  F16_TO_F32_BITS,
  bf16BitsToF32,
  bitsToF32,
  f16BitsToF32,
  f32BitsToBf16Bits,
  f32BitsToF16Bits,
  f32ToBf16Bits,
  f32ToBits,
  f32ToF16Bits,
  roundToF16,
} from "./half";
