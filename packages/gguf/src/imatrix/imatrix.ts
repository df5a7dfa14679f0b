/**
 * An importance matrix as llama.cpp's llama-imatrix collects it and llama-quantize reads it
 * (common/imatrix-loader.h): per weight tensor, the sum over the calibration tokens of the square
 * of every input column's activation, and how many tokens went into each sum.
 */

/** One weight tensor's data. A dense matrix has one count; routed experts ([in, out, experts]) one per expert. */
export interface ImatrixEntry {
  /** [matrices * columns]: matrix m's column c at m * columns + c (GGUF: raw sums; legacy: sums / count * ncall). */
  readonly sums: Float32Array;
  /** Per matrix: the tokens its sums add up (GGUF), or the legacy file's single ncall. */
  readonly counts: readonly number[];
}

export interface Imatrix {
  /** By weight tensor name ("blk.0.attn_q.weight"), in bytewise name order. */
  readonly entries: ReadonlyMap<string, ImatrixEntry>;
  /** The calibration files' names (imatrix.datasets; a legacy file's trailing name). */
  readonly datasets: readonly string[];
  /** Chunks the data was computed over (imatrix.chunk_count; a legacy file's trailing call count). */
  readonly chunkCount: number;
  /** Tokens per chunk (imatrix.chunk_size; 0 for a legacy file, which does not record it). */
  readonly chunkSize: number;
  /** Read from llama.cpp's older `.dat` format, whose sums are already normalised (see importanceOf). */
  readonly legacy: boolean;
}

/** The GGUF metadata of an imatrix file, as llama-imatrix's save_imatrix writes it (in this order). */
export const IMATRIX_KEYS = {
  type: "general.type",
  datasets: "imatrix.datasets",
  chunkCount: "imatrix.chunk_count",
  chunkSize: "imatrix.chunk_size",
} as const;

/** general.type of an imatrix file. */
export const IMATRIX_GENERAL_TYPE = "imatrix";
/** Tensor name suffixes: `<weight>.in_sum2` [columns, matrices] and `<weight>.counts` [1, matrices], both f32. */
export const IMATRIX_SUMS_SUFFIX = ".in_sum2";
export const IMATRIX_COUNTS_SUFFIX = ".counts";

/** Weight names in the order llama-imatrix stores them (std::sort of std::string: bytewise). */
export function imatrixNameOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}
