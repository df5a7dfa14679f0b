/**
 * Writes an importance matrix as llama-imatrix's save_imatrix writes it (GGUF v3): general.type,
 * imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size in that order; then, by weight name
 * in bytewise order, `<name>.in_sum2` (f32 [columns, matrices]) and `<name>.counts` (f32 [1,
 * matrices]), where ggml drops a trailing dimension of 1 ([columns] and [1] for a dense matrix).
 */
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { GGMLType } from "../ggml-type";
import { ggufValue } from "../gguf-value";
import { type GGUFTensorToWrite, writeGGUF } from "../write-gguf";
import { IMATRIX_COUNTS_SUFFIX, IMATRIX_GENERAL_TYPE, IMATRIX_KEYS, IMATRIX_SUMS_SUFFIX, type Imatrix, imatrixNameOrder } from "./imatrix";

/** The bytes of writeImatrix's file. */
export function encodeImatrix(imatrix: Imatrix): Uint8Array {
  if (imatrix.legacy) {
    throw new RangeError("a legacy imatrix holds normalised sums and no chunk size: it cannot be written as GGUF as it is (llama-imatrix --in-file FILE.dat converts one)");
  }
  for (const [key, value] of [[IMATRIX_KEYS.chunkCount, imatrix.chunkCount], [IMATRIX_KEYS.chunkSize, imatrix.chunkSize]] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) throw new RangeError(`${key} must be a uint32, got ${value}`);
  }
  const tensors: GGUFTensorToWrite[] = [];
  for (const name of [...imatrix.entries.keys()].sort(imatrixNameOrder)) {
    const { sums, counts } = imatrix.entries.get(name)!;
    const matrices = counts.length;
    if (matrices === 0 || sums.length === 0 || sums.length % matrices !== 0) {
      throw new RangeError(`imatrix entry "${name}": ${sums.length} sums do not divide into ${matrices} matrices`);
    }
    const bad = counts.find((count) => !Number.isInteger(count) || count < 0);
    if (bad !== undefined) throw new RangeError(`imatrix entry "${name}": count ${bad} is not a non-negative integer`);
    const columns = sums.length / matrices;
    tensors.push({ name: `${name}${IMATRIX_SUMS_SUFFIX}`, type: GGMLType.F32, shape: matrices === 1 ? [columns] : [columns, matrices], data: bytesOf(sums) });
    tensors.push({ name: `${name}${IMATRIX_COUNTS_SUFFIX}`, type: GGMLType.F32, shape: matrices === 1 ? [1] : [1, matrices], data: bytesOf(Float32Array.from(counts)) });
  }
  const metadata = new Map([
    [IMATRIX_KEYS.type, ggufValue.string(IMATRIX_GENERAL_TYPE)],
    [IMATRIX_KEYS.datasets, ggufValue.stringArray([...imatrix.datasets])],
    [IMATRIX_KEYS.chunkCount, ggufValue.uint32(imatrix.chunkCount)],
    [IMATRIX_KEYS.chunkSize, ggufValue.uint32(imatrix.chunkSize)],
  ]);
  return writeGGUF({ metadata, tensors });
}

/**
 * Writes `imatrix` to `path` in llama.cpp's GGUF imatrix format (what llama-quantize --imatrix
 * reads), beside `path` first and renamed over it once complete.
 */
export function writeImatrix(path: string, imatrix: Imatrix): void {
  writeWhole(path, encodeImatrix(imatrix));
}

/** Writes `bytes` beside `path` first and renames them over it once complete. */
export function writeWhole(path: string, bytes: Uint8Array): void {
  const temporary = `${path}.partial-${process.pid}-${Date.now()}`;
  try {
    writeFileSync(temporary, bytes);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

function bytesOf(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}
