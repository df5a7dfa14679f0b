import { TOP_K_ROWS_MAX } from "./backend";
import type { Model } from "./load-model";

export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
}

/** log Σ exp(row), computed stably in double precision. */
export function logSumExp(row: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return max + Math.log(sum);
}

/** The `k` most probable tokens of a logits row with their log-probabilities, most probable first (ties: lower id first). */
export function topLogprobs(row: Float32Array, k: number): TokenLogprob[] {
  const normaliser = logSumExp(row);
  const top: number[] = [];
  for (let i = 0; i < row.length; i++) {
    if (top.length === k && row[i]! <= row[top[k - 1]!]!) continue;
    let at = top.length < k ? top.length : k - 1;
    top[at] = i;
    while (at > 0 && row[top[at - 1]!]! < row[i]!) {
      top[at] = top[at - 1]!;
      top[at - 1] = i;
      at--;
    }
  }
  return top.map((id) => ({ id, logprob: row[id]! - normaliser }));
}

export interface LogprobsResult {
  readonly tokens: readonly number[];
  /** For each input position i: the top-K next tokens after tokens[0..i]. */
  readonly positions: ReadonlyArray<{ readonly top: TokenLogprob[] }>;
}

/** One prefill over `tokens`; the top-K next-token log-probabilities at every position. */
export function computeLogprobs(model: Model, tokens: readonly number[], topK: number): LogprobsResult {
  if (tokens.length === 0) throw new RangeError("logprobs needs at least one token");
  if (!Number.isInteger(topK) || topK < 1) throw new RangeError(`top-k must be a positive integer, got ${topK}`);
  const vocabulary = model.vocabularySize;
  const cache = model.createCache(tokens.length);
  const positions: Array<{ top: TokenLogprob[] }> = [];
  if (topK <= Math.min(vocabulary, TOP_K_ROWS_MAX)) {
    // Every row's best candidates and log Σ exp, on the backend where it can: the same numbers as
    // topLogprobs of the logits (exactly, where they are taken on the host).
    for (const top of model.transformer.forwardTops(Int32Array.from(tokens), cache, topK)) {
      const normaliser = top.logSumExp![0]!;
      positions.push({ top: Array.from(top.ids, (id, i) => ({ id, logprob: top.logits[i]! - normaliser })) });
    }
    cache.dispose();
    return { tokens: [...tokens], positions };
  }
  // Logits for a few rows at a time keeps memory at [rows, vocabulary] however long the input.
  const step = 64;
  for (let start = 0; start < tokens.length; start += step) {
    const chunk = tokens.slice(start, start + step);
    const logits = model.forward(chunk, cache, { logits: "all" });
    for (let r = 0; r < chunk.length; r++) positions.push({ top: topLogprobs(logits.subarray(r * vocabulary, (r + 1) * vocabulary), topK) });
  }
  cache.dispose();
  return { tokens: [...tokens], positions };
}

export interface PerplexityResult {
  readonly perplexity: number;
  /** The standard error of the perplexity (llama.cpp's "PPL = x +/- y"): PPL × the standard error of the mean negative log-likelihood. */
  readonly uncertainty: number;
  /** Perplexity after each window, as llama.cpp's perplexity tool prints it ([1]x,[2]y,...). */
  readonly perWindow: number[];
  /** After each window: the mean negative log-likelihood so far and its standard error (llama-perplexity --ppl-output-type 1). */
  readonly perWindowNll: Array<{ readonly mean: number; readonly stderr: number }>;
  readonly windows: number;
  readonly scoredTokens: number;
  readonly context: number;
}

export interface PerplexityOptions {
  /** At most this many windows (llama.cpp's --chunks); default: every whole window of the text. */
  readonly chunks?: number;
  /** Tokens per forward step (llama.cpp's -b): a window runs in steps of min(batchSize, context) tokens. Default: the whole window. */
  readonly batchSize?: number;
}

/** How many windows of `context` tokens to evaluate: every whole one, or at most `chunks`. */
export function windowCount(tokens: number, context: number, chunks: number | undefined, what: string): number {
  if (!Number.isInteger(context) || context < 4) throw new RangeError(`context must be an integer of at least 4, got ${context}`);
  if (chunks !== undefined && (!Number.isInteger(chunks) || chunks < 1)) throw new RangeError(`chunks must be a positive integer, got ${chunks}`);
  const windows = Math.min(Math.floor(tokens / context), chunks ?? Number.POSITIVE_INFINITY);
  if (windows < 1) throw new RangeError(`${what} needs at least ${context} tokens for a context of ${context}, the text has ${tokens}`);
  return windows;
}

/** The step of forward calls for a batch size (llama.cpp's n_batch, capped at the window). */
export function forwardStep(batchSize: number | undefined, context: number): number {
  if (batchSize === undefined) return context;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batch size must be a positive integer, got ${batchSize}`);
  return Math.min(batchSize, context);
}

/**
 * The forward steps over a window of `length` tokens, `step` tokens each, and in each step the rows
 * (relative to its start) whose next-token prediction is scored: positions j in [first, length − 1).
 */
export function* scoredSteps(length: number, first: number, step: number): Generator<{ start: number; end: number; rows: number[] }> {
  for (let start = 0; start < length; start += step) {
    const end = Math.min(length, start + step);
    const rows: number[] = [];
    for (let j = Math.max(first, start); j < Math.min(end, length - 1); j++) rows.push(j - start);
    yield { start, end, rows };
  }
}

/** Mean of the values and its standard error (sample variance / n), as llama.cpp's perplexity tool reports it. */
function meanAndStderr(sum: number, sumOfSquares: number, count: number): { mean: number; stderr: number } {
  const mean = sum / count;
  const variance = sumOfSquares / count - mean * mean;
  return { mean, stderr: variance > 0 && count > 1 ? Math.sqrt(variance / (count - 1)) : 0 };
}

/**
 * Perplexity as llama.cpp's perplexity tool computes it: the tokens are cut into windows of
 * `context` tokens; each window is evaluated from an empty cache, and only the second half of
 * its predictions is scored (token j + 1 from the logits at j, for j in [context/2, context − 1)).
 */
export function computePerplexity(model: Model, tokens: readonly number[], context: number, options: PerplexityOptions = {}): PerplexityResult {
  const windows = windowCount(tokens.length, context, options.chunks, "perplexity");
  const step = forwardStep(options.batchSize, context);
  const first = Math.floor(context / 2);
  let negativeLogLikelihood = 0;
  let squares = 0;
  let scored = 0;
  const perWindow: number[] = [];
  const perWindowNll: Array<{ mean: number; stderr: number }> = [];
  const cache = model.createCache(context);
  // The scored rows' log-probabilities of the next token, computed where the logits are
  // (Model.forwardLogprobs): one float per row comes back, so a window runs in maxBatchTokens steps.
  for (let w = 0; w < windows; w++) {
    cache.trim(0);
    const window = tokens.slice(w * context, (w + 1) * context);
    for (const { start, end, rows } of scoredSteps(context, first, step)) {
      const logprobs = model.forwardLogprobs(window.slice(start, end), cache, rows, Int32Array.from(rows, (r) => window[start + r + 1]!));
      for (const logprob of logprobs) {
        negativeLogLikelihood -= logprob;
        squares += logprob * logprob;
      }
      scored += rows.length;
    }
    perWindow.push(Math.exp(negativeLogLikelihood / scored));
    perWindowNll.push(meanAndStderr(negativeLogLikelihood, squares, scored));
  }
  cache.dispose();
  const perplexity = Math.exp(negativeLogLikelihood / scored);
  return { perplexity, uncertainty: perplexity * perWindowNll.at(-1)!.stderr, perWindow, perWindowNll, windows, scoredTokens: scored, context };
}

export interface Distribution {
  readonly mean: number;
  /** Standard error of the mean. */
  readonly stderr: number;
  readonly maximum: number;
  readonly minimum: number;
  /** llama-perplexity's percentiles: 99.9, 99, 95, 90, 75, 50 (median), 25, 10, 5, 1, 0.1. */
  readonly percentiles: Readonly<Record<"99.9" | "99" | "95" | "90" | "75" | "50" | "25" | "10" | "5" | "1" | "0.1", number>>;
}

export interface KlDivergenceResult {
  readonly windows: number;
  readonly scoredTokens: number;
  readonly context: number;
  /**
   * Perplexity of the model and of the base over the same scored tokens with their standard errors,
   * the correlation of the two models' per-token ln p, and mean ln(PPL(model) / PPL(base)) per token.
   */
  readonly perplexity: {
    readonly model: number;
    readonly modelUncertainty: number;
    readonly base: number;
    readonly baseUncertainty: number;
    readonly correlation: number;
    readonly lnRatio: number;
    readonly lnRatioStderr: number;
  };
  /** KL(base ‖ model) of each scored token's next-token distribution, in nats. */
  readonly klDivergence: Distribution;
  /** p_model − p_base of each scored token's actual next token; rms and the standard error of rms (llama.cpp's). */
  readonly deltaP: Distribution & { readonly rms: number; readonly rmsStderr: number };
  /** How often the two models' most likely next token is the same, and its standard error. */
  readonly sameTop: { readonly fraction: number; readonly stderr: number };
  /** Every scored token's figures, in order: KL divergence, change in probability, whether the top tokens agree (1) or not (0), and each model's −ln p of the actual next token. */
  readonly perToken: KlDivergencePerToken;
}

export interface KlDivergencePerToken {
  readonly klDivergence: Float64Array;
  readonly deltaP: Float64Array;
  readonly sameTop: Uint8Array;
  readonly nllModel: Float64Array;
  readonly nllBase: Float64Array;
}

/**
 * How far `model` (e.g. a quantized file) is from `base` (the model it was made from) over a text,
 * as llama-perplexity's --kl-divergence reports it: the windows and scored tokens of
 * computePerplexity, and for each scored token the KL divergence of the two next-token
 * distributions, the change in the probability of the actual next token, and whether the most
 * likely token is the same. Computed in float64 from full logits (llama.cpp stores the base's log
 * probabilities in 16 bits between its two runs: computeKlDivergenceFromBase reads those).
 */
export function computeKlDivergence(base: Model, model: Model, tokens: readonly number[], context: number, options: PerplexityOptions = {}): KlDivergenceResult {
  const vocabulary = model.vocabularySize;
  if (base.vocabularySize !== vocabulary) throw new RangeError(`the base model has ${base.vocabularySize} tokens in its vocabulary, the model ${vocabulary}: they cannot be compared`);
  const windows = windowCount(tokens.length, context, options.chunks, "KL divergence");
  const first = Math.floor(context / 2);
  const perToken: number[] = [];
  const deltas: number[] = [];
  const sameTops: number[] = [];
  const nllModel: number[] = [];
  const nllBase: number[] = [];
  const caches = [base.createCache(context), model.createCache(context)] as const;
  const step = Math.min(64, forwardStep(options.batchSize, context));
  try {
    for (let w = 0; w < windows; w++) {
      for (const cache of caches) cache.trim(0);
      const window = tokens.slice(w * context, (w + 1) * context);
      for (let start = 0; start < context - 1; start += step) {
        const chunk = window.slice(start, Math.min(start + step, context));
        const baseLogits = base.forward(chunk, caches[0], { logits: "all" });
        const modelLogits = model.forward(chunk, caches[1], { logits: "all" });
        for (let r = 0; r < chunk.length; r++) {
          const j = start + r;
          if (j < first || j >= context - 1) continue;
          const b = baseLogits.subarray(r * vocabulary, (r + 1) * vocabulary);
          const m = modelLogits.subarray(r * vocabulary, (r + 1) * vocabulary);
          const lseB = logSumExp(b);
          const lseM = logSumExp(m);
          let kld = 0;
          let topB = 0;
          let topM = 0;
          for (let i = 0; i < vocabulary; i++) {
            const lb = b[i]! - lseB;
            kld += Math.exp(lb) * (lb - (m[i]! - lseM));
            if (b[i]! > b[topB]!) topB = i;
            if (m[i]! > m[topM]!) topM = i;
          }
          const target = window[j + 1]!;
          const lpB = b[target]! - lseB;
          const lpM = m[target]! - lseM;
          nllBase.push(-lpB);
          nllModel.push(-lpM);
          perToken.push(kld);
          deltas.push(Math.exp(lpM) - Math.exp(lpB));
          sameTops.push(topB === topM ? 1 : 0);
        }
      }
    }
  } finally {
    for (const cache of caches) cache.dispose();
  }
  return summarizeKlDivergence(
    {
      klDivergence: Float64Array.from(perToken),
      deltaP: Float64Array.from(deltas),
      sameTop: Uint8Array.from(sameTops),
      nllModel: Float64Array.from(nllModel),
      nllBase: Float64Array.from(nllBase),
    },
    windows,
    context,
  );
}

/** llama-perplexity's --kl-divergence statistics of every scored token's figures. */
export function summarizeKlDivergence(perToken: KlDivergencePerToken, windows: number, context: number): KlDivergenceResult {
  const count = perToken.klDivergence.length;
  const lnRatios = perToken.nllModel.map((nll, i) => nll - perToken.nllBase[i]!);
  const ratio = distribution(lnRatios);
  const model = distribution(perToken.nllModel);
  const base = distribution(perToken.nllBase);
  // Pearson correlation of the two models' −ln p (llama.cpp's Cor(ln(PPL(Q)), ln(PPL(base))))
  let covariance = 0;
  for (let i = 0; i < count; i++) covariance += (perToken.nllModel[i]! - model.mean) * (perToken.nllBase[i]! - base.mean);
  const spread = Math.sqrt(model.stderr * model.stderr * base.stderr * base.stderr) * count * (count - 1);
  let same = 0;
  for (const s of perToken.sameTop) same += s;
  const fraction = same / count;
  const squares = perToken.deltaP.map((d) => d * d);
  const meanSquare = distribution(squares);
  const rms = Math.sqrt(meanSquare.mean);
  const pModel = Math.exp(model.mean);
  const pBase = Math.exp(base.mean);
  return {
    windows,
    scoredTokens: count,
    context,
    perplexity: {
      model: pModel,
      modelUncertainty: pModel * model.stderr,
      base: pBase,
      baseUncertainty: pBase * base.stderr,
      correlation: spread > 0 ? covariance / spread : 0,
      lnRatio: ratio.mean,
      lnRatioStderr: ratio.stderr,
    },
    klDivergence: distribution(perToken.klDivergence),
    deltaP: { ...distribution(perToken.deltaP), rms, rmsStderr: rms > 0 ? (0.5 / rms) * meanSquare.stderr : 0 },
    sameTop: { fraction, stderr: count > 1 ? Math.sqrt((fraction * (1 - fraction)) / (count - 1)) : 0 },
    perToken,
  };
}

/** Mean, standard error, extremes and llama-perplexity's percentiles (linear interpolation between the sorted values). */
function distribution(values: ArrayLike<number>): Distribution {
  const n = values.length;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += values[i]!;
  mean /= n;
  let variance = 0;
  for (let i = 0; i < n; i++) variance += (values[i]! - mean) * (values[i]! - mean);
  variance = n > 1 ? variance / (n - 1) : 0;
  const sorted = Float64Array.from(values).sort();
  const at = (fraction: number) => {
    const p = fraction * (n - 1);
    const i = Math.floor(p);
    return (1 - (p - i)) * sorted[i]! + (p - i) * sorted[Math.min(i + 1, n - 1)]!;
  };
  return {
    mean,
    stderr: Math.sqrt(variance / n),
    maximum: sorted[n - 1]!,
    minimum: sorted[0]!,
    percentiles: {
      "99.9": at(0.999),
      "99": at(0.99),
      "95": at(0.95),
      "90": at(0.9),
      "75": at(0.75),
      "50": at(0.5),
      "25": at(0.25),
      "10": at(0.1),
      "5": at(0.05),
      "1": at(0.01),
      "0.1": at(0.001),
    },
  };
}
