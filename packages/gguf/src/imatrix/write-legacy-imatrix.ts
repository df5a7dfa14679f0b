/**
 * Writes an importance matrix in llama.cpp's legacy `.dat` format, as llama-imatrix's
 * `--output-format dat` does (tools/imatrix/imatrix.cpp save_imatrix_legacy), little-endian:
 * int32 entry count; per entry, in bytewise name order, int32 name length, the name, int32 ncall
 * (the entry's largest count over the chunk size, rounded up), int32 value count and the f32
 * values (sum / count × ncall, in f32; 1 × ncall for an expert no token reached); then int32
 * chunk count, int32 dataset name length and the name (the last of imatrix.datasets, or none).
 * Entries no token reached at all are left out, as llama-imatrix leaves them out.
 */
import { type Imatrix, imatrixNameOrder } from "./imatrix";
import { writeWhole } from "./write-imatrix";

/** The bytes of writeLegacyImatrix's file. */
export function encodeLegacyImatrix(imatrix: Imatrix): Uint8Array {
  if (imatrix.legacy) throw new RangeError("the imatrix is already legacy data (normalised sums): combine it first (combineImatrices) to write it again");
  const chunkSize = imatrix.chunkSize;
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > 0x7fffffff) throw new RangeError(`the legacy format needs a chunk size of 1 to 2^31 - 1 tokens, got ${chunkSize}`);
  if (!Number.isInteger(imatrix.chunkCount) || imatrix.chunkCount < 0 || imatrix.chunkCount > 0x7fffffff) throw new RangeError(`chunk count ${imatrix.chunkCount} is not an int32`);
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  const int32 = (value: number) => {
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setInt32(0, value, true);
    parts.push(bytes);
  };
  const stored = [...imatrix.entries.keys()].sort(imatrixNameOrder).filter((name) => imatrix.entries.get(name)!.counts.some((count) => count !== 0));
  int32(stored.length);
  for (const name of stored) {
    const { sums, counts } = imatrix.entries.get(name)!;
    if (counts.length === 0 || sums.length % counts.length !== 0) throw new RangeError(`imatrix entry "${name}": ${sums.length} sums do not divide into ${counts.length} matrices`);
    const largest = Math.max(...counts);
    // int32 arithmetic, as llama.cpp's
    const ncall = Math.floor((largest + chunkSize - 1) / chunkSize);
    if (ncall > 0x7fffffff) throw new RangeError(`imatrix entry "${name}": ${largest} tokens are more than an int32 of chunks`);
    const nameBytes = encoder.encode(name);
    int32(nameBytes.byteLength);
    parts.push(nameBytes);
    int32(ncall);
    int32(sums.length);
    const columns = sums.length / counts.length;
    const calls = Math.fround(ncall);
    const values = new Float32Array(sums.length);
    for (let i = 0; i < sums.length; i++) {
      let count = Math.fround(counts[Math.floor(i / columns)]!);
      let value = sums[i]!;
      if (count === 0) {
        value = 1;
        count = 1;
      }
      values[i] = Math.fround(value / count) * calls;
    }
    parts.push(new Uint8Array(values.buffer));
  }
  int32(imatrix.chunkCount);
  const dataset = encoder.encode(imatrix.datasets.at(-1) ?? "");
  int32(dataset.byteLength);
  parts.push(dataset);
  const out = new Uint8Array(parts.reduce((total, part) => total + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/** Writes `imatrix` to `path` in the legacy format, beside `path` first and renamed over it once complete. */
export function writeLegacyImatrix(path: string, imatrix: Imatrix): void {
  writeWhole(path, encodeLegacyImatrix(imatrix));
}
