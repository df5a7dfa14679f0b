import { type PerplexityOptions, type PerplexityResult, forwardStep, scoredSteps } from "./evaluation";
import type { Model } from "./load-model";

export interface StridedPerplexityResult extends PerplexityResult {
  /** Tokens between the starts of two windows, and scored per window. */
  readonly stride: number;
}

/**
 * llama-perplexity --ppl-stride: windows of `context + stride/2` tokens (its context is widened by
 * half the stride), each from an empty cache, starting `stride` tokens apart; each window scores
 * its last `stride` predictions (token j + 1 from the logits at j, j in [window − stride − 1,
 * window − 1)), so every token after the first window is scored once with at least
 * window − stride − 1 tokens before it. Needs at least two windows' worth of tokens, as llama.cpp
 * does; `chunks` caps the windows. (llama-perplexity's window is its whole context, which llama.cpp
 * rounds up to a multiple of 256: `memra perplexity` passes the context that gives that window; see
 * llamaStridedWindow in @memra/cli.)
 */
export function computeStridedPerplexity(model: Model, tokens: readonly number[], context: number, stride: number, options: PerplexityOptions = {}): StridedPerplexityResult {
  if (!Number.isInteger(context) || context < 4) throw new RangeError(`context must be an integer of at least 4, got ${context}`);
  if (!Number.isInteger(stride) || stride < 1) throw new RangeError(`stride must be a positive integer, got ${stride}`);
  const window = context + Math.floor(stride / 2);
  if (stride > window - 1) throw new RangeError(`a stride of ${stride} scores more predictions than a window of ${window} tokens has (at most ${window - 1})`);
  if (tokens.length < 2 * window) throw new RangeError(`strided perplexity needs at least ${2 * window} tokens for a window of ${window} (context ${context} + stride ${stride} / 2), the text has ${tokens.length}`);
  if (options.chunks !== undefined && (!Number.isInteger(options.chunks) || options.chunks < 1)) throw new RangeError(`chunks must be a positive integer, got ${options.chunks}`);
  const windows = Math.min(Math.floor((tokens.length - window + stride - 1) / stride), options.chunks ?? Number.POSITIVE_INFINITY);
  const step = forwardStep(options.batchSize, window);
  const first = window - stride - 1;
  let negativeLogLikelihood = 0;
  let squares = 0;
  let scored = 0;
  const perWindow: number[] = [];
  const perWindowNll: Array<{ mean: number; stderr: number }> = [];
  const cache = model.createCache(window);
  try {
    for (let w = 0; w < windows; w++) {
      cache.trim(0);
      const tokensOfWindow = tokens.slice(w * stride, w * stride + window);
      for (const { start, end, rows } of scoredSteps(window, first, step)) {
        const logprobs = model.forwardLogprobs(tokensOfWindow.slice(start, end), cache, rows, Int32Array.from(rows, (r) => tokensOfWindow[start + r + 1]!));
        for (const logprob of logprobs) {
          negativeLogLikelihood -= logprob;
          squares += logprob * logprob;
        }
        scored += rows.length;
      }
      const mean = negativeLogLikelihood / scored;
      const variance = squares / scored - mean * mean;
      perWindow.push(Math.exp(mean));
      perWindowNll.push({ mean, stderr: variance > 0 && scored > 1 ? Math.sqrt(variance / (scored - 1)) : 0 });
    }
  } finally {
    cache.dispose();
  }
  const perplexity = perWindow.at(-1)!;
  return { perplexity, uncertainty: perplexity * perWindowNll.at(-1)!.stderr, perWindow, perWindowNll, windows, scoredTokens: scored, context: window, stride };
}
