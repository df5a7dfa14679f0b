/**
 * The input of the i-quant dequantization goldens (tools/llamacpp/iq-dequantize-goldens.ts records
 * what ggml makes of it; dequantize-iq.test.ts compares): 256 random blocks of a type, the first
 * four with edge scales (zero, the smallest subnormal, the largest finite f16, a negative scale).
 */
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { randomBlocks, setBlockScale } from "./random-blocks";

export const IQ_GOLDEN_TYPES: readonly GGMLType[] = [
  GGMLType.IQ2_XXS,
  GGMLType.IQ2_XS,
  GGMLType.IQ2_S,
  GGMLType.IQ3_XXS,
  GGMLType.IQ3_S,
  GGMLType.IQ1_S,
  GGMLType.IQ1_M,
  GGMLType.IQ4_NL,
  GGMLType.IQ4_XS,
];

export const IQ_GOLDEN_BLOCKS = 256;

export function iqGoldenInput(type: GGMLType): Uint8Array {
  const info = ggmlTypeInfo(type)!;
  const bytes = randomBlocks(type, IQ_GOLDEN_BLOCKS * info.blockSize, 20261203 + type, 0.02);
  [0x0000, 0x0001, 0x7bff, 0xbc00].forEach((bits, block) => setBlockScale(type, bytes, block, bits));
  return bytes;
}
