/**
 * An importance matrix over a calibration text, as llama.cpp's llama-imatrix computes it
 * (tools/imatrix/imatrix.cpp compute_imatrix and main): the text is tokenized with the vocabulary's
 * BOS/EOS flags and cut into chunks of `contextSize` tokens (at least two chunks' worth needed; what
 * follows the last whole chunk is dropped); each chunk is evaluated from an empty KV cache, its first
 * token replaced by BOS where the vocabulary adds one, with every row's logits computed (so the last
 * layer and, with processOutput, the LM head run on all rows), while an ImatrixCollector adds up each
 * weight's input squares. The perplexity llama-imatrix prints beside it (the second half of each
 * chunk's predictions) comes with the progress.
 *
 * The chunks go through the model in the forward steps llama.cpp's would, since a dense matmul is
 * collected only from steps of 16 rows or more: llama-imatrix evaluates n_seq = max(1, batchSize /
 * contextSize) chunks together, as sequences of one batch of at most batchSize tokens, which
 * llama_decode splits into ubatches of at most ubatchSize rows: one sequence in order
 * (split_simple), several as equal slices of every sequence (split_equal: floor(ubatchSize / n)
 * tokens of each of the n). Here each ubatch is one Transformer.forwardBatch of the same rows.
 *
 * llama-imatrix's --in-file, --from-chunk and --save-frequency are `initial` (the files combined by
 * combineImatrices: computing adds to them, their datasets come first and their counts in the chunk
 * count), `firstChunk` and `saveFrequency` with `onSave`.
 */
import type { Imatrix, MetadataOverride } from "@memra/gguf";
import type { Backend, KVType } from "./backend";
import { ImatrixCollector } from "./imatrix-collector";
import { type Model, loadModel } from "./load-model";
import { DEFAULT_BLOCK_TOKENS } from "./paged-kv-cache";
import { ReferenceBackend } from "./reference-backend";

/** llama.cpp's default n_batch and n_ubatch. */
export const IMATRIX_BATCH_TOKENS = 2048;
export const IMATRIX_UBATCH_TOKENS = 512;
/** llama.cpp's LLAMA_MAX_SEQ: a context holds at most this many sequences. */
const MAX_SEQUENCES = 256;

export interface ComputeImatrixOptions {
  /**
   * The backend to compute on; the reference backend when absent. computeImatrix loads the model on
   * it (wrapped in an ImatrixCollector) and disposes it, with the model, when it returns or throws
   * (options out of range are refused before it is touched).
   */
  readonly backend?: Backend;
  /** Tokens per chunk (llama-imatrix -c, default 512). */
  readonly contextSize?: number;
  /** Tokens evaluated together, several chunks packed as sequences (llama-imatrix -b, default 2048). */
  readonly batchSize?: number;
  /** Rows of one forward step (llama-imatrix -ub, default 512). */
  readonly ubatchSize?: number;
  /** At most this many chunks (llama-imatrix --chunks; default: every whole chunk of the text). */
  readonly chunks?: number;
  /** Collect output.weight too (llama-imatrix --process-output). */
  readonly processOutput?: boolean;
  /** Parse special tokens in the text (llama-imatrix --parse-special). Default false. */
  readonly parseSpecial?: boolean;
  /** The calibration file's name as recorded in imatrix.datasets (llama-imatrix records its -f as given). */
  readonly dataset?: string;
  /** KV cache element type; llama.cpp's default is f16. */
  readonly kvType?: KVType;
  /** Metadata values instead of the file's (--override-kv). */
  readonly metadataOverrides?: readonly MetadataOverride[];
  /** Called after each chunk. */
  readonly onChunk?: (progress: ImatrixProgress) => void;
  /**
   * Data to add to (llama-imatrix --in-file: the files combined by combineImatrices, with this
   * contextSize as chunk size). Its datasets come before `dataset`. Its entries must fit the model
   * (checkImatrixModel tells which file does not); a size that does not is an error when met.
   */
  readonly initial?: Imatrix;
  /** Skip this many chunks of the text first (llama-imatrix --chunk / --from-chunk). Default 0. */
  readonly firstChunk?: number;
  /**
   * Call onSave every this many chunks (llama-imatrix --save-frequency): when the chunk count (the
   * largest count over contextSize, loaded data included) passes a multiple of it, at the weight
   * whose count passed it, in the middle of the forward step as llama-imatrix does. 0: never.
   */
  readonly saveFrequency?: number;
  /** The data so far and the chunk count, for a copy (llama-imatrix writes `<output>.at_<chunk>`). */
  readonly onSave?: (imatrix: Imatrix, chunk: number) => void;
  /**
   * Call onOutput every this many chunks (llama-imatrix --output-frequency, default 10 there), at the
   * same point as onSave and before it. 0 or absent: never.
   */
  readonly outputFrequency?: number;
  /** The data so far and the chunk count, for the output file (llama-imatrix rewrites it then). */
  readonly onOutput?: (imatrix: Imatrix, chunk: number) => void;
}

export interface ImatrixProgress {
  /** Chunks done, and in all. */
  readonly chunk: number;
  readonly chunks: number;
  /** Tokens of the text (what is left of it after firstChunk). */
  readonly tokens: number;
  /** Seconds since the first chunk started. */
  readonly seconds: number;
  /** Perplexity over the chunks so far, as llama-imatrix prints it ([1]x,[2]y,...). */
  readonly perplexity: number;
}

/**
 * The importance matrix of the model at `modelPath` over `text` (or tokens, used as they are).
 * @throws RangeError when the text has fewer than two chunks' tokens or an option is out of range.
 */
export function computeImatrix(modelPath: string, text: string | readonly number[], options: ComputeImatrixOptions = {}): Imatrix {
  const contextSize = options.contextSize ?? 512;
  const batchSize = options.batchSize ?? IMATRIX_BATCH_TOKENS;
  const ubatchSize = options.ubatchSize ?? IMATRIX_UBATCH_TOKENS;
  for (const [name, value] of [["contextSize", contextSize], ["batchSize", batchSize], ["ubatchSize", ubatchSize], ["chunks", options.chunks ?? 1]] as const) {
    if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
  const firstChunk = options.firstChunk ?? 0;
  for (const [name, value] of [["firstChunk", firstChunk], ["saveFrequency", options.saveFrequency ?? 0], ["outputFrequency", options.outputFrequency ?? 0]] as const) {
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  }
  if (options.initial?.legacy) throw new RangeError("initial: legacy imatrix data holds normalised sums: combine it first (combineImatrices)");
  // llama-imatrix's main: n_seq chunks a batch, the batch and ubatch no larger than they fill
  const sequences = Math.max(1, Math.floor(batchSize / contextSize));
  if (sequences > MAX_SEQUENCES) throw new RangeError(`a context of ${contextSize} packs ${sequences} chunks into a batch of ${batchSize}; llama.cpp allows at most ${MAX_SEQUENCES} sequences`);
  const batch = Math.min(batchSize, sequences * contextSize);
  const ubatch = Math.min(ubatchSize, batch);
  const datasets = [...(options.initial?.datasets ?? []), ...(options.dataset === undefined ? [] : [options.dataset])];
  const collector: ImatrixCollector = new ImatrixCollector({
    processOutput: options.processOutput ?? false,
    chunkSize: contextSize,
    ...(options.initial ? { initial: options.initial } : {}),
    saveFrequency: options.saveFrequency ?? 0,
    onSave: (chunk) => options.onSave?.(collector.toImatrix({ datasets }), chunk),
    outputFrequency: options.outputFrequency ?? 0,
    onOutput: (chunk) => options.onOutput?.(collector.toImatrix({ datasets }), chunk),
  });
  const inner = options.backend ?? new ReferenceBackend();
  let model: Model;
  try {
    model = loadModel(modelPath, {
      backend: collector.wrap(inner),
      maxBatchTokens: ubatch,
      kvType: options.kvType ?? "f16",
      decodeGraphs: false,
      ...(options.metadataOverrides ? { metadataOverrides: options.metadataOverrides } : {}),
    });
  } catch (error) {
    inner.dispose();
    throw error;
  }
  try {
    let tokens = typeof text === "string" ? model.tokenizer.encode(text, { special: options.parseSpecial ?? false }) : [...text];
    if (firstChunk > 0) {
      if ((firstChunk + 2) * contextSize >= tokens.length) {
        throw new RangeError(`the text tokenizes to ${tokens.length} tokens; after skipping ${firstChunk} chunk${firstChunk === 1 ? "" : "s"} of ${contextSize} fewer than two are left (llama-imatrix wants more than ${(firstChunk + 2) * contextSize})`);
      }
      tokens = tokens.slice(firstChunk * contextSize);
    }
    if (tokens.length < 2 * contextSize) {
      throw new RangeError(`the text tokenizes to ${tokens.length} tokens; a context of ${contextSize} needs at least ${2 * contextSize}`);
    }
    const available = Math.floor(tokens.length / contextSize);
    const chunks = Math.min(options.chunks ?? available, available);
    const bos = model.tokenizer.addBos ? model.tokenizer.bosTokenId : undefined;
    const first = Math.floor(contextSize / 2);
    const scoredRow = (i: number) => i >= first && i < contextSize - 1;
    const pool = model.createKVPool(sequences * Math.ceil(contextSize / DEFAULT_BLOCK_TOKENS), { blockTokens: DEFAULT_BLOCK_TOKENS });
    const caches = Array.from({ length: sequences }, () => pool.createSequence(contextSize));
    const started = performance.now();
    let negativeLogLikelihood = 0;
    let scored = 0;
    try {
      for (let chunk = 0; chunk < chunks; chunk += sequences) {
        const group = Math.min(sequences, chunks - chunk);
        const originals = Array.from({ length: group }, (_, s) => tokens.slice((chunk + s) * contextSize, (chunk + s + 1) * contextSize));
        const inputs = originals.map((original) => {
          const input = Int32Array.from(original);
          if (bos !== undefined) input[0] = bos;
          return input;
        });
        const nll = new Float64Array(group);
        for (const cache of caches) cache.trim(0);
        // one ubatch: rows [from, to) of each of the group's first `count` sequences
        const step = (from: number, to: number, count: number) => {
          const entries = Array.from({ length: count }, (_, s) => {
            // every row through the LM head with --process-output (llama.cpp computes all logits), else the scored rows
            const rows: number[] = [];
            for (let i = from; i < to; i++) if (options.processOutput || scoredRow(i)) rows.push(i - from);
            const targets = Int32Array.from(rows, (row) => originals[s]![from + row + 1] ?? 0);
            return { tokens: inputs[s]!.subarray(from, to), cache: caches[s]!, logits: rows, logprobs: { targets, out: new Float64Array(rows.length) } };
          });
          collector.beginStep(count * (to - from));
          model.transformer.forwardBatch(entries);
          entries.forEach((entry, s) =>
            entry.logits.forEach((row, k) => {
              if (scoredRow(from + row)) nll[s] = nll[s]! - entry.logprobs.out[k]!;
            }),
          );
        };
        if (sequences === 1) {
          // batches of `batch` tokens, each cut into ubatches in order
          for (let start = 0; start < contextSize; start += batch) {
            const end = Math.min(contextSize, start + batch);
            for (let from = start; from < end; from += ubatch) step(from, Math.min(end, from + ubatch), 1);
          }
        } else {
          const slice = Math.max(1, Math.floor(ubatch / group));
          for (let from = 0; from < contextSize; from += slice) step(from, Math.min(contextSize, from + slice), group);
        }
        for (let s = 0; s < group; s++) {
          negativeLogLikelihood += nll[s]!;
          scored += contextSize - 1 - first;
          options.onChunk?.({ chunk: chunk + s + 1, chunks, tokens: tokens.length, seconds: (performance.now() - started) / 1000, perplexity: Math.exp(negativeLogLikelihood / scored) });
        }
      }
    } finally {
      for (const cache of caches) cache.dispose();
      pool.dispose();
    }
    return collector.toImatrix({ datasets });
  } finally {
    model.dispose();
  }
}
