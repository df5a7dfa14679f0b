/**
 * The input of the i-quant dequantization goldens (tools/llamacpp/iq-goldens.ts records
 * what ggml makes of it; dequantize-iq.test.ts compares): 256 random blocks of a type, the first
 * four with edge scales (zero, the smallest subnormal, the largest finite f16, a negative scale).
 */
import { GGMLType, ggmlTypeInfo } from "../ggml-type";
import { RANDOM_BLOCK_TYPES, randomBlocks, setBlockScale } from "./random-blocks";
import { seededNormalValues, seededUniform } from "./seeded-random";

/** Every i-quant (the types randomBlocks makes), in the goldens' order. */
export const IQ_GOLDEN_TYPES: readonly GGMLType[] = RANDOM_BLOCK_TYPES;

export const IQ_GOLDEN_BLOCKS = 256;

export function iqGoldenInput(type: GGMLType): Uint8Array {
  const info = ggmlTypeInfo(type)!;
  const bytes = randomBlocks(type, IQ_GOLDEN_BLOCKS * info.blockSize, 20261203 + type, 0.02);
  [0x0000, 0x0001, 0x7bff, 0xbc00].forEach((bits, block) => setBlockScale(type, bytes, block, bits));
  return bytes;
}

/** Types whose quantization (ggml_quantize_chunk without an importance matrix) has goldens. */
export const IQ_QUANTIZE_GOLDEN_TYPES: readonly GGMLType[] = [GGMLType.IQ3_S];

/**
 * The input of the i-quant quantization goldens: 512 super-blocks of bell-shaped values with a
 * scale per 32 drawn from 2^-8 .. 2^7, and edge cases: all-zero sub-blocks (ggml then does not
 * advance its index and sign pointers), a zero super-block, sparse blocks, small integers.
 */
export function iqQuantizeGoldenInput(): Float32Array {
  const values = seededNormalValues(512 * 256, 31);
  const uniform = seededUniform(32);
  for (let block = 0; block < values.length / 32; block++) {
    const scale = 2 ** (Math.floor(uniform() * 16) - 8);
    for (let j = 0; j < 32; j++) values[block * 32 + j]! *= scale;
  }
  values.fill(0, 0, 32); // the first sub-block of super-block 0
  values.fill(0, 256 + 96, 256 + 160); // two in the middle of super-block 1
  values.fill(0, 512, 768); // super-block 2
  for (let i = 768; i < 1024; i++) if (i % 5 !== 0) values[i] = 0; // sparse
  for (let i = 1024; i < 2048; i++) values[i] = Math.round(values[i]! * 4) / 4;
  return values;
}
