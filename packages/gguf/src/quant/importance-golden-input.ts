/**
 * The input of the importance-matrix quantization goldens (tools/llamacpp/imatrix-quantize-goldens.ts
 * records what ggml_quantize_chunk makes of it with an imatrix; quantize-importance.test.ts compares):
 * IMPORTANCE_GOLDEN_ROWS rows of IMPORTANCE_GOLDEN_ROW_LENGTH values and one importance vector of a
 * row's length. Only exact arithmetic (powers of two, integers, float32 rounding of doubles) builds
 * them, so they are the same floats on every engine.
 */
import { GGMLType } from "../ggml-type";
import { seededNormalValues, seededUniform } from "./seeded-random";

export const IMPORTANCE_GOLDEN_ROW_LENGTH = 4096;
export const IMPORTANCE_GOLDEN_ROWS = 12;

/** Every type `quantize` writes with importance, in the goldens' order (q8_0: ggml ignores the imatrix). */
export const IMPORTANCE_GOLDEN_TYPES: readonly GGMLType[] = [
  GGMLType.Q4_0,
  GGMLType.Q4_1,
  GGMLType.Q5_0,
  GGMLType.Q5_1,
  GGMLType.Q8_0,
  GGMLType.Q2_K,
  GGMLType.Q3_K,
  GGMLType.Q4_K,
  GGMLType.Q5_K,
  GGMLType.Q6_K,
  GGMLType.IQ4_NL,
  GGMLType.IQ4_XS,
  GGMLType.IQ3_S,
  GGMLType.IQ3_XXS,
];

/** Types that also have a golden of the same input without importance (ggml's imatrix = NULL path). */
export const IMPORTANCE_GOLDEN_UNWEIGHTED_TYPES: readonly GGMLType[] = [GGMLType.IQ3_XXS];

/**
 * The rows: bell-shaped values with a scale per 32 drawn from 2^-8 .. 2^7 and a scale per row from
 * 2^-6 .. 2^5 (the 32-value types take their sigma² over the whole row), a few outliers (x 48), and
 * in row 0 the edge cases: an all-zero 32-block, an all-zero 16-group, an all-zero super-block, a
 * sparse super-block, values of 2^-40 (above ggml's GROUP_MAX_EPS of 1e-15, below iq3_xxs's 1e-8),
 * values of 2^-60 (below both), values on a grid of 1/4 (ties in nearest_int) and large values (x 2^12).
 * Row 1 is all zero but for one super-block.
 */
export function importanceGoldenInput(): Float32Array {
  const n = IMPORTANCE_GOLDEN_ROW_LENGTH;
  const values = seededNormalValues(IMPORTANCE_GOLDEN_ROWS * n, 4711);
  const uniform = seededUniform(4712);
  for (let row = 0; row < IMPORTANCE_GOLDEN_ROWS; row++) {
    const rowScale = 2 ** (row - 6);
    for (let block = 0; block < n / 32; block++) {
      const scale = rowScale * 2 ** (Math.floor(uniform() * 16) - 8);
      for (let j = 0; j < 32; j++) values[row * n + block * 32 + j]! *= scale;
    }
    for (let k = 0; k < 6; k++) values[row * n + Math.floor(uniform() * n)]! *= 48;
  }
  values.fill(0, 0, 32); // a 32-block of super-block 0
  values.fill(0, 256 + 64, 256 + 80); // a 16-group of super-block 1
  values.fill(0, 512, 768); // super-block 2
  for (let i = 768; i < 1024; i++) if (i % 7 !== 0) values[i] = 0; // sparse
  for (let i = 1024; i < 1056; i++) values[i]! *= 2 ** -40; // tiny (one 32-block)
  for (let i = 1056; i < 1088; i++) values[i]! *= 2 ** -60; // tinier
  for (let i = 1280; i < 1536; i++) values[i] = Math.round(values[i]! * 4) / 4;
  for (let i = 1536; i < 1792; i++) values[i]! *= 2 ** 12;
  values.fill(0, n, 2 * n);
  for (let i = n + 3072; i < n + 3328; i++) values[i] = (i % 11) - 5;
  return values;
}

/**
 * The importance of each column: 2^e (1 + u) with e from -20 to 10 (orders of magnitude apart),
 * and exact zeros: every 97th column, a 16-group (512..527), a 32-block (1024..1055, on row 0's tiny
 * values) and a whole super-block (2304..2559). ggml gives finite, deterministic bytes for all of
 * them: a group whose weights are all zero keeps its first candidate's levels and gets scale 0.
 */
export function importanceGoldenImportance(): Float32Array {
  const n = IMPORTANCE_GOLDEN_ROW_LENGTH;
  const uniform = seededUniform(4713);
  const importance = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const exponent = Math.floor(uniform() * 31) - 20;
    importance[i] = 2 ** exponent * (1 + uniform());
  }
  for (let i = 0; i < n; i += 97) importance[i] = 0;
  importance.fill(0, 512, 528);
  importance.fill(0, 1024, 1056);
  importance.fill(0, 2304, 2560);
  return importance;
}
