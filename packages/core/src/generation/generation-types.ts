import type { TokenLogprob } from "../evaluation";

export type FinishReason = "stop" | "length" | "abort";

/** One generated token as it streams. */
export interface GenerationChunk {
  /** Text that became final with this token (may be empty while a character or a possible stop string is incomplete). */
  readonly text: string;
  /** The generated token; absent on a last chunk that only releases held-back text. */
  readonly token?: number;
  /** log p(token) under the model (softmax of the raw logits), when `logprobs` was asked for. */
  readonly logprob?: number;
  /** The most likely tokens at this step with their log-probabilities, when `topLogprobs` was asked for. */
  readonly topLogprobs?: readonly TokenLogprob[];
}

export interface GenerationTimings {
  readonly prefillMs: number;
  readonly decodeMs: number;
  /** Prompt tokens evaluated per second (tokens reused from a cache do not count). */
  readonly prefillTokensPerSecond: number;
  /** Generated tokens per second, after the first. */
  readonly decodeTokensPerSecond: number;
}

export interface GenerationResult {
  readonly text: string;
  readonly promptTokens: readonly number[];
  /** Generated token ids, including an end-of-generation token that stopped it. */
  readonly tokens: readonly number[];
  readonly finishReason: FinishReason;
  /** The sampling seed used (the one given, or the random one chosen). */
  readonly seed: number;
  /** The stop string that ended generation, when one did. */
  readonly stop?: string;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number; readonly cachedPromptTokens: number };
  readonly timings: GenerationTimings;
  /** With the `contextShift` option, when the context filled: the shifts done and the tokens they discarded. */
  readonly contextShift?: { readonly shifts: number; readonly discardedTokens: number };
  /** With the `speculative` option: draft tokens proposed, and those the model's picks agreed with (kept without a step of their own). */
  readonly speculative?: { readonly drafted: number; readonly accepted: number };
  /** With a `schema` or `grammar` option: the parsed value (zod's output, the JSON, or the grammar's text). */
  readonly value?: unknown;
}

/** A result whose `value` has the type a zod schema gives it. */
export interface StructuredGenerationResult<Value> extends GenerationResult {
  readonly value: Value;
}

/** An async iterable of chunks whose `result` resolves once the iteration has ended. */
export interface GenerationStream<Result extends GenerationResult = GenerationResult> extends AsyncIterable<GenerationChunk> {
  readonly result: Promise<Result>;
}
