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
  /** Perplexity after each window, as llama.cpp's perplexity tool prints it ([1]x,[2]y,...). */
  readonly perWindow: number[];
  readonly windows: number;
  readonly scoredTokens: number;
  readonly context: number;
}

/**
 * Perplexity as llama.cpp's perplexity tool computes it: the tokens are cut into windows of
 * `context` tokens; each window is evaluated from an empty cache, and only the second half of
 * its predictions is scored (token j + 1 from the logits at j, for j in [context/2, context − 1)).
 */
export function computePerplexity(model: Model, tokens: readonly number[], context: number): PerplexityResult {
  if (!Number.isInteger(context) || context < 4) throw new RangeError(`context must be an integer of at least 4, got ${context}`);
  const windows = Math.floor(tokens.length / context);
  if (windows < 1) throw new RangeError(`perplexity needs at least ${context} tokens for a context of ${context}, the text has ${tokens.length}`);
  const first = Math.floor(context / 2);
  let negativeLogLikelihood = 0;
  let scored = 0;
  const perWindow: number[] = [];
  const cache = model.createCache(context);
  // The scored rows' log-probabilities of the next token, computed where the logits are
  // (Model.forwardLogprobs): one float per row comes back, so a window runs in maxBatchTokens steps.
  const rows = Array.from({ length: context - 1 - first }, (_, i) => first + i);
  for (let w = 0; w < windows; w++) {
    cache.trim(0);
    const window = tokens.slice(w * context, (w + 1) * context);
    const logprobs = model.forwardLogprobs(window, cache, rows, Int32Array.from(rows, (r) => window[r + 1]!));
    for (const logprob of logprobs) negativeLogLikelihood -= logprob;
    scored += rows.length;
    perWindow.push(Math.exp(negativeLogLikelihood / scored));
  }
  cache.dispose();
  return { perplexity: Math.exp(negativeLogLikelihood / scored), perWindow, windows, scoredTokens: scored, context };
}
