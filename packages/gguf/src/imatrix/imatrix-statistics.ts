/**
 * Per-tensor statistics of an importance matrix, as llama-imatrix's `--show-statistics` computes
 * them (tools/imatrix/imatrix.cpp compute_statistics, compute_cossim, show_statistics), in f32 as
 * it does. Per tensor, over the mean squared activations (each matrix's sums over its count;
 * experts no token reached left out): their sum Σ(Act²), min, max, mean μ, standard deviation σ
 * (of the population), the share above 1e-5 ("active"), the entropy (bits) of their distribution
 * and its share of log2 of their number, the share more than one σ above μ ("ZD"), and the cosine
 * similarity of the raw sums with the same tensor of the previous block (0 for block 0 and tensors
 * outside blocks). Then per block, averages weighted by the values each tensor has.
 */
import type { Imatrix } from "./imatrix";

export interface ImatrixTensorStatistics {
  /** The weight's name ("blk.3.attn_q.weight"). */
  readonly name: string;
  /** Its block ("3"), "-" outside blocks: llama-imatrix's Layer column. */
  readonly layer: string;
  /** The name's part before "weight" ("attn_q"): llama-imatrix's Tensor column. */
  readonly tensor: string;
  readonly sum: number;
  readonly min: number;
  readonly max: number;
  readonly mean: number;
  readonly standardDeviation: number;
  /** Share (0 to 1) of the values above 1e-5. */
  readonly active: number;
  /** The values counted (columns × experts reached). */
  readonly elements: number;
  /** Bits. */
  readonly entropy: number;
  /** entropy / log2(elements), in percent (llama-imatrix's "E (norm)"). */
  readonly entropyPercent: number;
  /** Share (0 to 1) of the values more than one standard deviation above the mean. */
  readonly zd: number;
  readonly cosineSimilarity: number;
}

export interface ImatrixLayerStatistics {
  readonly layer: number;
  /** Σ(Act²), ZD share and cosine similarity of the block's tensors, averaged weighted by their elements. */
  readonly sum: number;
  readonly zd: number;
  readonly cosineSimilarity: number;
}

export interface ImatrixStatistics {
  /** In llama-imatrix's order: by Tensor column, then by Σ(Act²) from the largest. */
  readonly tensors: readonly ImatrixTensorStatistics[];
  /** Blocks in increasing order. */
  readonly layers: readonly ImatrixLayerStatistics[];
  /** Tensors left out, with why (every count zero). */
  readonly skipped: readonly string[];
}

const f = Math.fround;
const ACTIVE_THRESHOLD = f(1e-5);

/** llama-imatrix's statistics of `imatrix` (GGUF data: raw sums and counts; combine a legacy file first). */
export function imatrixStatistics(imatrix: Imatrix): ImatrixStatistics {
  if (imatrix.legacy) throw new RangeError("a legacy imatrix holds normalised sums: combine it first (combineImatrices), as llama-imatrix loads it");
  const computed: Array<ImatrixTensorStatistics & { readonly sums: Float32Array }> = [];
  const skipped: string[] = [];
  for (const [name, { sums, counts }] of imatrix.entries) {
    if (counts.length === 0 || sums.length % counts.length !== 0) {
      skipped.push(`${name}: ${sums.length} sums do not divide into ${counts.length} matrices`);
      continue;
    }
    const columns = sums.length / counts.length;
    const activations: number[] = [];
    counts.forEach((count, m) => {
      if (count === 0) return;
      const divisor = f(count);
      for (let j = 0; j < columns; j++) activations.push(f(sums[m * columns + j]! / divisor));
    });
    if (activations.length === 0) {
      skipped.push(`${name}: every count is zero`);
      continue;
    }
    const n = activations.length;
    let total = 0;
    let squares = 0;
    let max = activations[0]!;
    let min = activations[0]!;
    for (const value of activations) {
      total = f(total + value);
      squares = f(squares + f(value * value));
      if (value > max) max = value;
      if (value < min) min = value;
    }
    const mean = f(total / n);
    const variance = f(f(squares / n) - f(mean * mean));
    const deviation = f(Math.sqrt(Math.max(0, variance)));
    const inactive = activations.filter((value) => Math.abs(value) <= ACTIVE_THRESHOLD).length;
    const active = f(1 - f(inactive / n));
    let entropy = 0;
    if (total > 0) {
      for (const value of activations) {
        const p = f(value / total);
        if (p > 0) entropy = f(entropy - f(p * f(Math.log2(p))));
      }
    }
    let above = 0;
    if (deviation > 0) for (const value of activations) if (f(f(value - mean) / deviation) > 1) above++;
    const { layer, tensor } = splitTensorName(name);
    const zd = f(f(above) / n);
    computed.push({
      name,
      layer,
      tensor,
      sum: total,
      min,
      max,
      mean,
      standardDeviation: deviation,
      active,
      elements: n,
      entropy,
      entropyPercent: f(100 * (entropy / Math.log2(n))), // in double: std::log2 of an int is a double
      zd,
      cosineSimilarity: 0,
      sums,
    });
  }
  // the cosine similarity of the raw sums with the previous block's tensor of the same name
  const byName = new Map(computed.map((entry) => [entry.name, entry]));
  const tensors = computed.map(({ sums, ...entry }) => {
    const match = /blk\.(\d+)\./.exec(entry.name);
    if (!match) return entry;
    const start = match.index + 4;
    const previous = byName.get(`${entry.name.slice(0, start)}${Number.parseInt(match[1]!, 10) - 1}${entry.name.slice(start + match[1]!.length)}`);
    if (!previous) return entry;
    let dot = 0;
    let own = 0;
    let theirs = 0;
    for (let i = 0; i < sums.length; i++) {
      dot = f(dot + f(sums[i]! * (previous.sums[i] ?? 0)));
      own = f(own + f(sums[i]! * sums[i]!));
    }
    for (let i = 0; i < previous.sums.length; i++) theirs = f(theirs + f(previous.sums[i]! * previous.sums[i]!));
    return { ...entry, cosineSimilarity: f(dot / f(f(Math.sqrt(own)) * f(Math.sqrt(theirs)))) };
  });
  tensors.sort((a, b) => (a.tensor < b.tensor ? -1 : a.tensor > b.tensor ? 1 : b.sum - a.sum));
  const weighted = new Map<number, { sum: number; zd: number; cosineSimilarity: number; elements: number }>();
  for (const entry of tensors) {
    const layer = /^\d+$/.test(entry.layer) ? Number.parseInt(entry.layer, 10) : -1;
    const totals = weighted.get(layer) ?? { sum: 0, zd: 0, cosineSimilarity: 0, elements: 0 };
    const elements = f(entry.elements);
    totals.sum = f(totals.sum + f(elements * entry.sum));
    totals.zd = f(totals.zd + f(elements * entry.zd));
    totals.cosineSimilarity = f(totals.cosineSimilarity + f(elements * entry.cosineSimilarity));
    totals.elements += entry.elements;
    weighted.set(layer, totals);
  }
  const layers = [...weighted]
    .filter(([layer, totals]) => layer >= 0 && totals.elements > 0)
    .sort(([a], [b]) => a - b)
    .map(([layer, totals]) => ({ layer, sum: f(totals.sum / totals.elements), zd: f(totals.zd / totals.elements), cosineSimilarity: f(totals.cosineSimilarity / totals.elements) }));
  return { tensors, layers, skipped };
}

/**
 * llama-imatrix's process_tensor_name: the part after the first "blk" ("-" if none) and the part
 * before the first "weight" (the whole name if none), of the name split at dots.
 */
function splitTensorName(name: string): { layer: string; tensor: string } {
  const parts = name.split(".");
  const blk = parts.findIndex((part, i) => part === "blk" && i + 1 < parts.length);
  const weight = parts.findIndex((part, i) => part === "weight" && i > 0);
  return { layer: blk >= 0 ? parts[blk + 1]! : "-", tensor: weight >= 0 ? parts[weight - 1]! : name };
}
