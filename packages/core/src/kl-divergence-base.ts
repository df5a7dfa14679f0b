/**
 * llama-perplexity's --kl-divergence-base file: a base model's log-probabilities over a text, saved in
 * a first run so that a second run compares another model (a quantized one, say) with them without
 * loading both at once. The layout, native little-endian as llama.cpp writes it:
 *
 *   "_logits_"                       8 bytes
 *   n_ctx, n_vocab, n_chunk          3 × int32
 *   tokens                           n_chunk × n_ctx int32 (the windows, in order)
 *   for each chunk, for each scored row j in [n_ctx/2, n_ctx − 1):
 *     scale, min_log_prob            2 × float32
 *     q[0..n_vocab)                  uint16, padded with zeros to an even count
 *
 * A row stores ln p(i) ≈ min_log_prob + scale × q[i]: the logits within 16 of the largest are spread
 * over 0..65535, the rest are 0 (min_log_prob). Every window is written and read as it is computed,
 * so neither file nor logits are held whole.
 */
import { closeSync, fstatSync, openSync, readSync, writeSync } from "node:fs";
import { type KlDivergencePerToken, type KlDivergenceResult, type PerplexityOptions, type PerplexityResult, forwardStep, logSumExp, scoredSteps, summarizeKlDivergence, windowCount } from "./evaluation";
import type { Model } from "./load-model";

export const KL_DIVERGENCE_BASE_MAGIC = "_logits_";
/** Bytes before the tokens: the magic and n_ctx, n_vocab, n_chunk. */
export const KL_DIVERGENCE_BASE_HEADER_BYTES = 20;

export class KlDivergenceBaseError extends Error {
  override readonly name = "KlDivergenceBaseError";
}

/** uint16 values per saved row: scale and min_log_prob (two float32), then the vocabulary padded to an even count. */
export function klDivergenceBaseRowLength(vocabularySize: number): number {
  return 2 * Math.floor((vocabularySize + 1) / 2) + 4;
}

/** Rows scored (and saved) per window of `context` tokens: j in [context/2, context − 1). */
export function scoredRowsPerWindow(context: number): number {
  return context - 1 - Math.floor(context / 2);
}

/** float32 rounding to the nearest integer, ties to even (llama.cpp's nearest_int: x + 1.5·2^23 in float). */
function nearestInteger(x: number): number {
  const rounded = Math.round(x);
  return rounded - x === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

/**
 * One logits row in the saved form (llama.cpp's log_softmax to uint16, in its float32 arithmetic):
 * `out` (klDivergenceBaseRowLength(logits.length) values) gets scale and min_log_prob as float32
 * bits, then the quantized log-probabilities. The padding value, if any, is left as it is.
 */
export function quantizeLogProbabilities(logits: Float32Array, out: Uint16Array): void {
  const f = Math.fround;
  const n = logits.length;
  let maximum = logits[0]!;
  let minimum = logits[0]!;
  for (let i = 1; i < n; i++) {
    if (logits[i]! > maximum) maximum = logits[i]!;
    if (logits[i]! < minimum) minimum = logits[i]!;
  }
  minimum = Math.max(minimum, f(maximum - 16));
  let sum = 0;
  for (let i = 0; i < n; i++) sum += f(Math.exp(f(logits[i]! - maximum)));
  const logSum = f(Math.log(sum));
  const minimumLogProbability = f(f(minimum - maximum) - logSum);
  const scale = f(f(maximum - minimum) / 65535);
  const header = new Float32Array(out.buffer, out.byteOffset, 2);
  header[0] = scale;
  header[1] = minimumLogProbability;
  const values = out.subarray(4, 4 + n);
  if (scale === 0) {
    values.fill(0);
    return;
  }
  const inverse = f(1 / scale);
  // a uint16 store keeps the low 16 bits, as llama.cpp's does
  for (let i = 0; i < n; i++) values[i] = logits[i]! > minimum ? nearestInteger(f(inverse * f(logits[i]! - minimum))) : 0;
}

export interface SaveKlDivergenceBaseOptions extends PerplexityOptions {
  /** Called after each window with its index and the perplexity so far. */
  readonly onWindow?: (window: number, perplexity: number) => void;
}

/**
 * llama-perplexity -m BASE -f TEXT --kl-divergence-base FILE: the perplexity of `model` over the
 * windows of computePerplexity, saving the tokens and every scored row's log-probabilities to `path`
 * window by window. Returns the perplexity (computed in float64 from the full logits).
 */
export function saveKlDivergenceBase(model: Model, tokens: readonly number[], context: number, path: string, options: SaveKlDivergenceBaseOptions = {}): PerplexityResult {
  const windows = windowCount(tokens.length, context, options.chunks, "a KL divergence base");
  const step = forwardStep(options.batchSize, context);
  const vocabulary = model.vocabularySize;
  const first = Math.floor(context / 2);
  const rows = scoredRowsPerWindow(context);
  const rowLength = klDivergenceBaseRowLength(vocabulary);
  const header = new DataView(new ArrayBuffer(KL_DIVERGENCE_BASE_HEADER_BYTES));
  for (let i = 0; i < 8; i++) header.setUint8(i, KL_DIVERGENCE_BASE_MAGIC.charCodeAt(i));
  header.setInt32(8, context, true);
  header.setInt32(12, vocabulary, true);
  header.setInt32(16, windows, true);
  const chunk = new Uint16Array(rows * rowLength); // [rows, rowLength], reused window after window
  let negativeLogLikelihood = 0;
  let squares = 0;
  let scored = 0;
  const perWindow: number[] = [];
  const perWindowNll: Array<{ mean: number; stderr: number }> = [];
  const descriptor = openSync(path, "w");
  const cache = model.createCache(context);
  try {
    writeAll(descriptor, new Uint8Array(header.buffer));
    writeAll(descriptor, new Uint8Array(Int32Array.from(tokens.slice(0, windows * context)).buffer));
    for (let w = 0; w < windows; w++) {
      cache.trim(0);
      const window = tokens.slice(w * context, (w + 1) * context);
      for (const { start, end, rows: wanted } of scoredSteps(context, first, step)) {
        const logits = model.forward(window.slice(start, end), cache, { logits: wanted });
        wanted.forEach((local, k) => {
          const j = start + local;
          const row = logits.subarray(k * vocabulary, (k + 1) * vocabulary);
          quantizeLogProbabilities(row, chunk.subarray((j - first) * rowLength, (j - first + 1) * rowLength));
          const nll = logSumExp(row) - row[window[j + 1]!]!;
          negativeLogLikelihood += nll;
          squares += nll * nll;
        });
        scored += wanted.length;
      }
      writeAll(descriptor, new Uint8Array(chunk.buffer));
      perWindow.push(Math.exp(negativeLogLikelihood / scored));
      const mean = negativeLogLikelihood / scored;
      const variance = squares / scored - mean * mean;
      perWindowNll.push({ mean, stderr: variance > 0 && scored > 1 ? Math.sqrt(variance / (scored - 1)) : 0 });
      options.onWindow?.(w, perWindow[w]!);
    }
  } finally {
    cache.dispose();
    closeSync(descriptor);
  }
  const perplexity = Math.exp(negativeLogLikelihood / scored);
  return { perplexity, uncertainty: perplexity * perWindowNll.at(-1)!.stderr, perWindow, perWindowNll, windows, scoredTokens: scored, context };
}

function writeAll(descriptor: number, bytes: Uint8Array): void {
  for (let written = 0; written < bytes.length; ) written += writeSync(descriptor, bytes, written, bytes.length - written);
}

/** Reads bytes.length bytes at `position` (fewer only at the end of the file); returns how many were read. */
function readAll(descriptor: number, bytes: Uint8Array, position: number): number {
  let read = 0;
  while (read < bytes.length) {
    const n = readSync(descriptor, bytes, read, bytes.length - read, position + read);
    if (n === 0) break;
    read += n;
  }
  return read;
}

/** An open --kl-divergence-base file: its header and tokens, checked against its size; its windows read one at a time. */
export class KlDivergenceBaseFile implements Disposable {
  readonly rowsPerChunk: number;
  readonly rowLength: number;
  #descriptor: number | undefined;

  constructor(
    readonly path: string,
    descriptor: number,
    readonly context: number,
    readonly vocabularySize: number,
    readonly chunks: number,
    /** [chunks × context] */
    readonly tokens: Int32Array,
  ) {
    this.#descriptor = descriptor;
    this.rowsPerChunk = scoredRowsPerWindow(context);
    this.rowLength = klDivergenceBaseRowLength(vocabularySize);
  }

  /** Bytes of one window's rows. */
  get chunkBytes(): number {
    return this.rowsPerChunk * this.rowLength * 2;
  }

  /** Window `index`'s saved rows, [rowsPerChunk, rowLength], into `out` (allocated when absent). */
  readChunk(index: number, out: Uint16Array = new Uint16Array(this.rowsPerChunk * this.rowLength)): Uint16Array {
    if (this.#descriptor === undefined) throw new KlDivergenceBaseError(`${this.path} is closed`);
    if (!Number.isInteger(index) || index < 0 || index >= this.chunks) throw new RangeError(`chunk ${index} is outside the ${this.chunks} of ${this.path}`);
    if (out.length !== this.rowsPerChunk * this.rowLength) throw new RangeError(`a chunk has ${this.rowsPerChunk * this.rowLength} values, the buffer ${out.length}`);
    const offset = KL_DIVERGENCE_BASE_HEADER_BYTES + this.tokens.byteLength + index * this.chunkBytes;
    const read = readAll(this.#descriptor, new Uint8Array(out.buffer, out.byteOffset, out.byteLength), offset);
    if (read < out.byteLength) throw new KlDivergenceBaseError(`${this.path}: chunk ${index} ends early at byte ${offset + read} (the file shrank while being read)`);
    return out;
  }

  dispose(): void {
    if (this.#descriptor === undefined) return;
    closeSync(this.#descriptor);
    this.#descriptor = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Opens a --kl-divergence-base file (llama-perplexity's or saveKlDivergenceBase's), checking its
 * magic, sizes and tokens against the file's length before reading anything large. Errors are
 * KlDivergenceBaseErrors naming the file and what is wrong.
 */
export function openKlDivergenceBase(path: string): KlDivergenceBaseFile {
  let descriptor: number;
  try {
    descriptor = openSync(path, "r");
  } catch (error) {
    throw new KlDivergenceBaseError(`cannot open ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    const size = fstatSync(descriptor).size;
    const fail = (what: string): never => {
      throw new KlDivergenceBaseError(`${path}: ${what}`);
    };
    if (size < KL_DIVERGENCE_BASE_HEADER_BYTES) fail(`${size} bytes, shorter than the ${KL_DIVERGENCE_BASE_HEADER_BYTES}-byte header of a llama-perplexity --kl-divergence-base file`);
    const head = new Uint8Array(KL_DIVERGENCE_BASE_HEADER_BYTES);
    readAll(descriptor, head, 0);
    if (String.fromCharCode(...head.subarray(0, 8)) !== KL_DIVERGENCE_BASE_MAGIC) fail(`does not start with "${KL_DIVERGENCE_BASE_MAGIC}": not a llama-perplexity --kl-divergence-base file`);
    const view = new DataView(head.buffer);
    const context = view.getInt32(8, true);
    const vocabulary = view.getInt32(12, true);
    const chunks = view.getInt32(16, true);
    if (context < 4) fail(`n_ctx (offset 8) is ${context}: windows of at least 4 tokens are compared`);
    if (vocabulary < 1) fail(`n_vocab (offset 12) is ${vocabulary}`);
    if (chunks < 1) fail(`n_chunk (offset 16) is ${chunks}`);
    const tokenBytes = 4 * context * chunks;
    const expected = KL_DIVERGENCE_BASE_HEADER_BYTES + tokenBytes + chunks * scoredRowsPerWindow(context) * klDivergenceBaseRowLength(vocabulary) * 2;
    const shape = `n_ctx ${context}, n_vocab ${vocabulary}, n_chunk ${chunks}`;
    if (size < expected) fail(`truncated: ${size} bytes, its header (${shape}) calls for ${expected}`);
    if (size > expected) fail(`${size - expected} bytes after the last chunk (its header, ${shape}, calls for ${expected})`);
    const tokens = new Int32Array(context * chunks);
    readAll(descriptor, new Uint8Array(tokens.buffer), KL_DIVERGENCE_BASE_HEADER_BYTES);
    const outside = tokens.findIndex((token) => token < 0 || token >= vocabulary);
    if (outside >= 0) fail(`token ${outside} (offset ${KL_DIVERGENCE_BASE_HEADER_BYTES + 4 * outside}) is ${tokens[outside]}, outside the vocabulary of ${vocabulary}`);
    return new KlDivergenceBaseFile(path, descriptor, context, vocabulary, chunks, tokens);
  } catch (error) {
    closeSync(descriptor);
    throw error;
  }
}

export interface KlDivergenceFromBaseOptions {
  /** At most this many of the file's windows (default: all). */
  readonly chunks?: number;
  /** Tokens per forward step (llama.cpp's -b); default: the whole window. */
  readonly batchSize?: number;
  /** Called after each window with its index. */
  readonly onWindow?: (window: number) => void;
}

/**
 * llama-perplexity -m MODEL --kl-divergence-base FILE --kl-divergence: `model` over the saved
 * windows of `base`, each scored row compared with the saved log-probabilities as llama.cpp compares
 * them (KL divergence over the base's tokens with ln p > −16, the base's −ln p of the next token
 * from its saved value, top token: the first largest), in float64. The statistics are
 * computeKlDivergence's.
 */
export function computeKlDivergenceFromBase(model: Model, base: KlDivergenceBaseFile, options: KlDivergenceFromBaseOptions = {}): KlDivergenceResult {
  const vocabulary = model.vocabularySize;
  if (base.vocabularySize !== vocabulary) throw new KlDivergenceBaseError(`${base.path} was saved from a model with ${base.vocabularySize} tokens in its vocabulary, this one has ${vocabulary}: they cannot be compared`);
  const context = base.context;
  const windows = windowCount(base.chunks * context, context, options.chunks, "KL divergence");
  const step = forwardStep(options.batchSize, context);
  const first = Math.floor(context / 2);
  const rows = base.rowsPerChunk;
  const rowLength = base.rowLength;
  const count = windows * rows;
  const perToken: KlDivergencePerToken = {
    klDivergence: new Float64Array(count),
    deltaP: new Float64Array(count),
    sameTop: new Uint8Array(count),
    nllModel: new Float64Array(count),
    nllBase: new Float64Array(count),
  };
  const saved = new Uint16Array(rows * rowLength); // [rows, rowLength]
  const savedScales = new Float32Array(saved.buffer); // scale, min_log_prob at [r * rowLength / 2 + 0, 1]
  const cache = model.createCache(context);
  try {
    for (let w = 0; w < windows; w++) {
      base.readChunk(w, saved);
      cache.trim(0);
      const window = Array.from(base.tokens.subarray(w * context, (w + 1) * context));
      for (const { start, end, rows: wanted } of scoredSteps(context, first, step)) {
        const logits = model.forward(window.slice(start, end), cache, { logits: wanted });
        wanted.forEach((local, k) => {
          const j = start + local;
          const r = j - first;
          const at = w * rows + r;
          const m = logits.subarray(k * vocabulary, (k + 1) * vocabulary);
          const q = saved.subarray(r * rowLength + 4, r * rowLength + 4 + vocabulary);
          const scale = savedScales[(r * rowLength) / 2]!;
          const minimum = savedScales[(r * rowLength) / 2 + 1]!;
          const normaliser = logSumExp(m);
          let kld = 0;
          let top = 0;
          let topBase = 0;
          for (let i = 0; i < vocabulary; i++) {
            if (m[i]! > m[top]!) top = i;
            if (q[i]! > q[topBase]!) topBase = i;
            const logBase = scale * q[i]! + minimum;
            if (logBase > -16) kld += Math.exp(logBase) * (logBase - (m[i]! - normaliser));
          }
          const target = window[j + 1]!;
          const nllModel = normaliser - m[target]!;
          const nllBase = -(scale * q[target]! + minimum);
          perToken.klDivergence[at] = kld;
          perToken.deltaP[at] = Math.exp(-nllModel) - Math.exp(-nllBase);
          perToken.sameTop[at] = top === topBase ? 1 : 0;
          perToken.nllModel[at] = nllModel;
          perToken.nllBase[at] = nllBase;
        });
      }
      options.onWindow?.(w);
    }
  } finally {
    cache.dispose();
  }
  return summarizeKlDivergence(perToken, windows, context);
}
