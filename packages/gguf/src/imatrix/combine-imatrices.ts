/**
 * Importance matrices added together as llama-imatrix's `--in-file` loads them
 * (tools/imatrix/imatrix.cpp IMatrixCollector::load_imatrix, one file after the other):
 * - a GGUF file's sums and counts are added per tensor and per expert, in f32 and in integers;
 *   an entry with one count meeting one with several (a dense or legacy entry, then experts) has
 *   its count repeated for every expert first;
 * - a legacy `.dat` file's normalised sums are scaled back by the chunk size (sums × chunkSize,
 *   in f32) and its ncall becomes ncall × chunkSize tokens, added to every count of the entry;
 * - datasets are concatenated in file order; the chunk count is the largest count over chunkSize.
 * The chunk size is not the files' own: it is the one of the run (llama-imatrix's -c, 512 by
 * default), which the result records.
 *
 * Where llama-imatrix refuses (a tensor whose sums or expert counts differ in size from the files
 * before it) this throws an ImatrixError naming the file and the tensor; it also refuses a legacy
 * entry of another size, which llama-imatrix would read past the end of.
 */
import type { Imatrix, ImatrixEntry } from "./imatrix";
import { imatrixNameOrder } from "./imatrix";
import { ImatrixError } from "./imatrix-error";

export interface ImatrixSource {
  /** The file's name, for errors. */
  readonly path: string;
  readonly imatrix: Imatrix;
}

interface Accumulated {
  sums: Float32Array;
  counts: number[];
}

/**
 * The sum of `sources` (in order) with `chunkSize` tokens a chunk (llama-imatrix's -c).
 * @throws ImatrixError when a tensor's size differs from the files before it.
 * @throws RangeError when chunkSize is not a positive integer.
 */
export function combineImatrices(sources: readonly ImatrixSource[], options: { readonly chunkSize: number }): Imatrix {
  const { chunkSize } = options;
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > 0xffffffff) throw new RangeError(`chunkSize must be a positive uint32, got ${chunkSize}`);
  const chunkSizeF32 = Math.fround(chunkSize);
  const combined = new Map<string, Accumulated>();
  const datasets: string[] = [];
  for (const { path, imatrix } of sources) {
    const fail = (name: string, problem: string): never => {
      throw new ImatrixError(path, `tensor "${name}"`, -1, `${problem}: not the model of the files before it`);
    };
    for (const [name, entry] of imatrix.entries) {
      let target = combined.get(name);
      if (imatrix.legacy) {
        if (!target) {
          target = { sums: new Float32Array(entry.sums.length), counts: [0] };
          combined.set(name, target);
        } else if (target.sums.length !== entry.sums.length) {
          fail(name, `${entry.sums.length} values, ${target.sums.length} in the files before it`);
        }
        for (let j = 0; j < entry.sums.length; j++) target.sums[j] = target.sums[j]! + Math.fround(entry.sums[j]! * chunkSizeF32);
        const tokens = (entry.counts[0] ?? 0) * chunkSize;
        target.counts = target.counts.map((count) => count + tokens);
        continue;
      }
      if (!target) {
        target = { sums: new Float32Array(entry.sums.length), counts: [] };
        combined.set(name, target);
      } else if (target.sums.length !== entry.sums.length) {
        fail(name, `${entry.sums.length} sums, ${target.sums.length} in the files before it`);
      }
      if (target.counts.length === 0) target.counts = new Array<number>(entry.counts.length).fill(0);
      else if (target.counts.length === 1 && entry.counts.length > 1) target.counts = new Array<number>(entry.counts.length).fill(target.counts[0]!);
      else if (target.counts.length !== entry.counts.length) fail(name, `${entry.counts.length} counts (experts), ${target.counts.length} in the files before it`);
      for (let j = 0; j < entry.sums.length; j++) target.sums[j] = target.sums[j]! + entry.sums[j]!;
      for (let j = 0; j < entry.counts.length; j++) target.counts[j] = target.counts[j]! + entry.counts[j]!;
    }
    datasets.push(...imatrix.datasets);
  }
  const entries = new Map<string, ImatrixEntry>();
  let largest = 0;
  for (const name of [...combined.keys()].sort(imatrixNameOrder)) {
    const { sums, counts } = combined.get(name)!;
    entries.set(name, { sums, counts });
    for (const count of counts) largest = Math.max(largest, count);
  }
  return { entries, datasets, chunkCount: Math.floor(largest / chunkSize), chunkSize, legacy: false };
}
