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

/** Types whose quantization with an importance matrix has goldens (iq-imatrix-quantize-goldens.json). */
export const IQ_IMATRIX_GOLDEN_TYPES: readonly GGMLType[] = [GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ1_S, GGMLType.IQ1_M];

/** Of those, the types ggml also quantizes without one (recorded both ways). */
export const IQ_IMATRIX_OPTIONAL_TYPES: readonly GGMLType[] = [GGMLType.IQ2_S, GGMLType.IQ1_M];

export interface IqImatrixGoldenInput {
  /** 16 rows of `rowLength` values. */
  readonly values: Float32Array;
  readonly rowLength: number;
  /** One row's importance (`rowLength` values), as llama-quantize passes an imatrix entry. */
  readonly importance: Float32Array;
}

/**
 * The input of the importance-matrix quantization goldens: 16 rows of 2048 values (128
 * super-blocks), the first 8 super-blocks iqQuantizeGoldenInput's edge cases (zero sub-blocks and
 * super-block, sparse values, multiples of 1/4, which tie in iq1's sort), then: magnitudes around
 * 2^-40 and 2^-24 (between the types' "all zero" thresholds, 1e-15 .. 1e-7), around 2^12, an
 * outlier 64× per 32 values, all negative, one constant value, zeros in every other 16 values, one
 * value per 8, −0 mixed with +0. The importance spans 2^-12 .. 2^13, with 2^-40, 2^30 and zeros
 * (a whole 32 and every 97th; ggml's output stays finite).
 */
export function iqImatrixGoldenInput(): IqImatrixGoldenInput {
  const rowLength = 2048;
  const values = iqQuantizeGoldenInput().slice(0, 16 * rowLength);
  const block = (i: number) => values.subarray(256 * i, 256 * (i + 1));
  block(8).forEach((v, i, a) => (a[i] = v * 2 ** -40));
  block(9).forEach((v, i, a) => (a[i] = v * 2 ** -24));
  block(10).forEach((v, i, a) => (a[i] = v * 2 ** 12));
  block(11).forEach((v, i, a) => (a[i] = i % 32 === 7 ? v * 64 : v));
  block(12).forEach((v, i, a) => (a[i] = -Math.abs(v)));
  block(13).fill(0.5);
  block(14).forEach((_v, i, a) => (i % 32 < 16 ? (a[i] = 0) : undefined));
  block(15).forEach((_v, i, a) => (i % 8 !== 3 ? (a[i] = 0) : undefined));
  block(16).forEach((v, i, a) => (a[i] = i % 3 === 0 ? (i % 2 ? -0 : 0) : v));
  const uniform = seededUniform(33);
  const importance = new Float32Array(rowLength);
  for (let i = 0; i < rowLength; i++) importance[i] = 2 ** (Math.floor(uniform() * 24) - 12) * (1 + uniform());
  importance[5] = 2 ** -40;
  importance[300] = 2 ** 30;
  importance.fill(0, 1024 + 64, 1024 + 96);
  for (let i = 0; i < rowLength; i += 97) importance[i] = 0;
  return { values, rowLength, importance };
}
