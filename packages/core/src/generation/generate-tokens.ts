import { StopSequenceMatcher, createSampler, isPlainGreedy, topCandidatesSuffice } from "@memra/sampler";
import { TOP_K_ROWS_MAX } from "../backend";
import type { EngineSequence } from "../engine/inference-engine";
import { type TokenLogprob, logSumExp, topLogprobs } from "../evaluation";
import type { Model } from "../load-model";
import type { TopCandidates } from "../models/qwen3";
import { InvalidOptionError, type ResolvedGenerateOptions } from "./generation-options";
import { StructuredOutputError, createGenerationConstraint } from "./output-constraint";
import type { FinishReason, GenerationChunk, GenerationResult, GenerationStream } from "./generation-types";
import { IndentLimit } from "./indent-limit";
import { createDrafter } from "./speculative";

export interface GenerationRequest {
  readonly model: Model;
  readonly promptTokens: readonly number[];
  /** The engine sequence to run on; its first `cachedTokens` tokens are promptTokens[0..cachedTokens). */
  readonly sequence: EngineSequence;
  readonly cachedTokens: number;
  readonly options: ResolvedGenerateOptions;
  /** Called with the result (to update a chat session) before `result` resolves. */
  readonly onFinish?: (result: GenerationResult) => void;
}

/**
 * The generation loop: prefill the prompt in chunks (checking the abort signal between them),
 * then sample, stream and feed back one token at a time until an end-of-generation token, a stop
 * string, maxTokens or an abort. Leaving the iteration early ends generation as an abort.
 */
/** Most draft tokens per step taken from a prediction when the speculative options do not say. */
const DEFAULT_PREDICTION_DRAFT = 16;

export function generateTokens(request: GenerationRequest): GenerationStream {
  const { model, promptTokens, sequence, options } = request;
  if (promptTokens.length === 0) throw new RangeError("the prompt has no tokens");
  if (request.cachedTokens >= promptTokens.length) throw new RangeError("at least the last prompt token must be evaluated");
  const shift = contextShiftOf(options, promptTokens.length, sequence.capacity);
  if (!shift && promptTokens.length + options.maxTokens > sequence.capacity) {
    throw new RangeError(`prompt (${promptTokens.length} tokens) + maxTokens (${options.maxTokens}) exceeds the context of ${sequence.capacity} tokens`);
  }

  let settle!: { resolve: (result: GenerationResult) => void; reject: (error: unknown) => void };
  const result = new Promise<GenerationResult>((resolve, reject) => {
    settle = { resolve, reject };
  });
  result.catch(() => {}); // the iteration rethrows; an unread result must not be an unhandled rejection

  const tokenizer = model.tokenizer;
  const stops = options.stop === undefined ? [] : Array.isArray(options.stop) ? options.stop : [options.stop];
  const stopTokens = new Set(options.stopTokens ?? []);
  for (const token of stopTokens) {
    if (token >= model.vocabularySize) throw new InvalidOptionError("stopTokens", `stopTokens: token id ${token} is outside the vocabulary (0..${model.vocabularySize - 1})`);
  }
  if (options.minTokens > options.maxTokens) throw new InvalidOptionError("minTokens", `minTokens (${options.minTokens}) exceeds maxTokens (${options.maxTokens})`);
  // Tokens no pick may be: end of generation always with ignoreEos; it and the stop tokens before minTokens.
  const endOfGeneration = [...tokenizer.endOfGenerationTokenIds];
  const alwaysBanned = options.ignoreEos ? new Set(endOfGeneration) : undefined;
  const earlyBanned = options.minTokens > 0 ? new Set([...endOfGeneration, ...stopTokens]) : undefined;
  const mostBanned = Math.max(alwaysBanned?.size ?? 0, earlyBanned?.size ?? 0);
  /** The tokens banned at the step that picks the generation's token number `count` (0-based). */
  const bannedAt = (count: number): ReadonlySet<number> | undefined => (earlyBanned && count < options.minTokens ? earlyBanned : alwaysBanned);
  const generated: number[] = [];
  let text = "";
  let finishReason: FinishReason = "length";
  let stopString: string | undefined;
  let prefillMs = 0;
  let decodeStarted = 0;
  const constraint = createGenerationConstraint(model, options);
  const baseSampler = createSampler(options, { vocabularySize: model.vocabularySize, tokenText: (id) => tokenizer.tokenText(id) });
  const sampler = constraint ? constraint.wrap(baseSampler) : baseSampler;
  // Steps the sampler alone decides: all without a constraint, those before a lazy grammar's trigger.
  const mayBeFree = !constraint || constraint.free !== undefined;
  const free = () => !constraint || constraint.free!();
  // A plain greedy pick needs no logits on the host: the backend picks the token (one int read
  // back per step instead of the vocabulary's logits).
  const plainGreedy = mayBeFree && isPlainGreedy(options);
  // With banned tokens the backend gives candidates enough to find the best allowed ones among.
  const pickOnBackend = plainGreedy && !options.logprobs && mostBanned === 0;
  // A sampled pick that depends on the best candidates alone gets only those (k ids and logits,
  // picked on the backend where it can) instead of the vocabulary's logits.
  const suffice = mayBeFree && !plainGreedy && baseSampler.sampleTop ? topCandidatesSuffice(options, model.vocabularySize) : 0;
  // Log-probabilities of such picks (and of plain greedy ones) need the best max(k, topLogprobs)
  // and the row's log Σ exp, not the logits: the picked token is among those candidates.
  const withLogprobs = options.logprobs && (suffice > 0 || plainGreedy);
  const forPick = mostBanned > 0 && (plainGreedy || suffice > 0) ? Math.min(Math.max(suffice, 1) + mostBanned, model.vocabularySize) : 0;
  const wanted = Math.max(forPick, withLogprobs ? Math.min(Math.max(suffice, options.topLogprobs, 1), model.vocabularySize) : suffice);
  const topK = wanted <= TOP_K_ROWS_MAX ? wanted : 0;
  const evaluateTop = (tokens: readonly number[], chunkTokens?: number) => sequence.evaluateTop(tokens, topK, options.signal, chunkTokens, { logSumExp: withLogprobs });
  /**
   * The step's token from its candidates: the best (plain greedy) or sampled from the best
   * `suffice`, banned tokens left out (there are `mostBanned` more candidates than the pick needs).
   */
  const pickFromTop = (top: TopCandidates, history: readonly number[], banned: ReadonlySet<number> | undefined): number => {
    let { ids, logits } = top;
    if (banned) {
      const kept = Array.from(ids.keys()).filter((i) => !banned.has(ids[i]!)).slice(0, Math.max(suffice, 1));
      ids = Int32Array.from(kept, (i) => top.ids[i]!);
      logits = Float32Array.from(kept, (i) => top.logits[i]!);
    }
    return suffice === 0 ? ids[0]! : baseSampler.sampleTop!(ids.subarray(0, suffice), logits.subarray(0, suffice), history).token;
  };
  /** The logits the sampler sees: the step's, with the banned tokens at -inf in a copy (logprobs stay the model's). */
  const allowedLogits = (logits: Float32Array, banned: ReadonlySet<number> | undefined): Float32Array => {
    if (!banned) return logits;
    const masked = logits.slice();
    for (const id of banned) masked[id] = -Infinity;
    return masked;
  };
  // Speculative decoding: draft tokens evaluated after the fed token in the same step.
  const prediction = options.prediction === undefined ? undefined : typeof options.prediction === "string" ? tokenizer.encode(options.prediction, { special: false }) : options.prediction;
  const outside = prediction?.find((token) => token >= model.vocabularySize);
  if (outside !== undefined) throw new InvalidOptionError("prediction", `prediction: token id ${outside} is outside the vocabulary (0..${model.vocabularySize - 1})`);
  const drafter = createDrafter(model, options.speculative, sequence.capacity, options.prefillChunkTokens, prediction && { tokens: prediction, promptLength: promptTokens.length });
  const draftTokens = options.speculative?.tokens ?? DEFAULT_PREDICTION_DRAFT;
  if (shift && drafter) throw new InvalidOptionError("contextShift", "contextShift cannot be combined with speculative decoding or a prediction");
  let drafted = 0;
  let accepted = 0;
  let shifts = 0;
  let discardedTokens = 0;
  // Draft tokens per step, adapted to how many the model keeps (HF transformers' heuristic for
  // assisted generation): 2 more after a step that kept all, 1 fewer after one that did not.
  let draftBudget = draftTokens;

  // Prompt tokens the engine found in its prefix cache (a recompute after preemption may find more).
  const reused = () => Math.min(sequence.reusedTokens, promptTokens.length - 1 - request.cachedTokens);
  const finish = (): GenerationResult => {
    const decodeMs = decodeStarted === 0 ? 0 : performance.now() - decodeStarted;
    const evaluated = promptTokens.length - request.cachedTokens - reused();
    const final: GenerationResult = {
      text,
      promptTokens: [...promptTokens],
      tokens: generated,
      finishReason,
      seed: sampler.seed,
      ...(stopString === undefined ? {} : { stop: stopString }),
      ...(shifts > 0 ? { contextShift: { shifts, discardedTokens } } : {}),
      usage: { promptTokens: promptTokens.length, completionTokens: generated.length, cachedPromptTokens: request.cachedTokens + reused() },
      ...(drafter ? { speculative: { drafted, accepted } } : {}),
      timings: {
        prefillMs,
        decodeMs,
        prefillTokensPerSecond: prefillMs > 0 ? (evaluated / prefillMs) * 1000 : 0,
        decodeTokensPerSecond: decodeMs > 0 && generated.length > 1 ? ((generated.length - 1) / decodeMs) * 1000 : 0,
      },
    };
    request.onFinish?.(final);
    // Parsed after onFinish, so that a session is released even when the output is no value.
    if (constraint) {
      try {
        return { ...final, value: constraint.parse(text, finishReason) };
      } catch (error) {
        if (error instanceof StructuredOutputError && !error.result) throw new StructuredOutputError(error.message, error.text, error.finishReason, { cause: error.cause, result: final });
        throw error;
      }
    }
    return final;
  };

  async function* run(): AsyncGenerator<GenerationChunk> {
    try {
      yield* steps();
    } finally {
      drafter?.dispose();
    }
  }

  async function* steps(): AsyncGenerator<GenerationChunk> {
    const matcher = new StopSequenceMatcher(stops);
    const indentLimit = options.minIndent > 0 ? new IndentLimit(options.minIndent) : undefined;
    let sawNewline = false;
    const decoder = tokenizer.createStreamingDecoder();
    const history: number[] = [...promptTokens];
    const aborted = () => options.signal?.aborted === true;
    sequence.rewind(request.cachedTokens);

    // Prefill: the engine runs the prompt in chunks, batched with other sequences' steps, and
    // answers undefined when the signal aborts between two of them.
    const prefillStarted = performance.now();
    const prompt = promptTokens.slice(request.cachedTokens);
    let logits: Float32Array | undefined;
    let picked: number | undefined;
    let top: TopCandidates | undefined;
    // A speculative step's outputs: rows 0..drafts.length, row i after the fed token and drafts[0..i).
    let drafts: number[] = [];
    let rowLogits: Float32Array | undefined;
    let rowTops: readonly TopCandidates[] | undefined;
    let row = 0;
    /** Evaluates the tokens to what the next pick needs: its token, its best candidates, or the logits. Whether the signal aborted. */
    const evaluate = async (tokens: readonly number[], chunkTokens?: number): Promise<boolean> => {
      logits = picked = top = rowLogits = rowTops = undefined;
      drafts = [];
      if (pickOnBackend && free()) picked = await sequence.evaluateGreedy(tokens, options.signal, chunkTokens);
      else if (topK > 0 && free()) top = await evaluateTop(tokens, chunkTokens);
      else logits = await sequence.evaluate(tokens, options.signal, chunkTokens);
      return logits === undefined && picked === undefined && top === undefined;
    };
    /**
     * Feeds the picked token, with draft tokens after it where the drafter has some: the model's
     * outputs after each of them come back from one step (its best candidates, or the logits where
     * the pick needs them). Whether the signal aborted.
     */
    const evaluateNext = async (token: number): Promise<boolean> => {
      const most = Math.min(draftBudget, options.maxTokens - generated.length - 1, sequence.capacity - history.length);
      const guess = drafter && most > 0 ? await drafter.propose(history, most, options.signal) : [];
      if (aborted()) return true;
      if (guess.length === 0) return evaluate([token]);
      logits = picked = top = rowLogits = rowTops = undefined;
      drafts = guess;
      row = 0;
      drafted += guess.length;
      const candidates = (pickOnBackend || topK > 0) && free() ? Math.max(topK, 1) : 0;
      const outputs = await sequence.evaluateRows([token, ...guess], guess.length + 1, { top: candidates, logSumExp: withLogprobs, signal: options.signal });
      if (outputs === undefined) return true;
      if ("tops" in outputs) rowTops = outputs.tops;
      else rowLogits = outputs.logits;
      return false;
    };
    const vocabulary = model.vocabularySize;
    const abortedInPrefill = await evaluate(prompt, options.prefillChunkTokens);
    prefillMs = performance.now() - prefillStarted;
    if (abortedInPrefill || aborted()) {
      finishReason = "abort";
      return;
    }

    // Decode: sample, stream, feed the token back.
    decodeStarted = performance.now();
    while (true) {
      let token: number;
      // The outputs this pick reads: a speculative step's row, or the step's own.
      const stepLogits = rowLogits ? rowLogits.subarray(row * vocabulary, (row + 1) * vocabulary) : logits;
      const stepTop = rowTops ? rowTops[row]! : top;
      const banned = bannedAt(generated.length);
      if (stepLogits) token = sampler.sample(allowedLogits(stepLogits, banned), history).token;
      else {
        token = picked ?? pickFromTop(stepTop!, history, banned);
        constraint?.observe!(token);
      }
      generated.push(token);
      history.push(token);
      if (tokenizer.isEndOfGeneration(token) || stopTokens.has(token)) {
        finishReason = "stop";
        break;
      }
      const step = matcher.push(decoder.push(token));
      const kept = indentLimit ? indentLimit.push(step.text) : step;
      text += kept.text;
      if (!sawNewline && kept.text.includes("\n")) sawNewline = true;
      if (!options.logprobs) yield { text: kept.text, token };
      else yield { text: kept.text, token, ...(stepTop ? logprobsOfTop(stepTop, token, options.topLogprobs) : logprobsOfLogits(stepLogits!, token, options.topLogprobs)) };
      if (kept !== step && kept.stopped) {
        finishReason = "length"; // llama.cpp's indentation limit; the text held back is after the cut
        return;
      }
      if (step.stopped) {
        finishReason = "stop";
        stopString = step.stop;
        return;
      }
      if (constraint?.isFinished()) {
        finishReason = "stop"; // the grammar is complete: nothing but end of generation could follow
        break;
      }
      if (generated.length >= options.maxTokens) break;
      if (options.maxTimeMs !== undefined && performance.now() - decodeStarted > options.maxTimeMs && (!options.maxTimeAfterNewline || sawNewline)) break;
      if (aborted()) {
        finishReason = "abort";
        break;
      }
      // The next row of a speculative step holds the model's outputs after this token when it is
      // the draft token that row was evaluated after (top candidates serve only free picks).
      if (row < drafts.length && token === drafts[row] && (rowLogits !== undefined || free())) {
        row++;
        accepted++;
        continue;
      }
      // The cache holds the drafts after the last accepted one: forget them (this token is fed next).
      if (drafts.length > 0) {
        draftBudget = row === drafts.length ? Math.min(draftTokens, draftBudget + 2) : Math.max(1, draftBudget - 1);
        sequence.rewind(history.length - 1);
      }
      // The context would fill with this token: shift it (llama.cpp's n_past + 1 >= n_ctx).
      if (shift && sequence.tokens.length + 1 >= sequence.capacity) {
        const discard = shift.discard ?? Math.floor((sequence.tokens.length - shift.keep) / 2);
        sequence.shift(shift.keep, discard);
        shifts++;
        discardedTokens += discard;
      }
      if (await evaluateNext(token)) {
        finishReason = "abort";
        break;
      }
    }
    // Text held back (an incomplete character, a possible start of a stop string) is final now.
    const tail = matcher.push(decoder.flush()).text + matcher.flush();
    if (tail) {
      text += tail;
      yield { text: tail };
    }
  }

  let started = false;
  let drainScheduled = false;
  const stream: GenerationStream = {
    /**
     * Read before any iteration has begun, the result runs the generation itself (from a timer, so
     * that `const { result } = stream; for await (const chunk of stream)` still streams): awaiting
     * `generate(...).result` alone then resolves instead of waiting forever.
     */
    get result() {
      if (!started && !drainScheduled) {
        drainScheduled = true;
        setTimeout(() => {
          if (started) return;
          void (async () => {
            try {
              for await (const _chunk of stream) {
                // the chunks are in the result's text
              }
            } catch {
              // the result promise carries the error
            }
          })();
        }, 0);
      }
      return result;
    },
    [Symbol.asyncIterator](): AsyncIterator<GenerationChunk> {
      if (started) throw new Error("a generation stream can be iterated only once");
      started = true;
      const iterator = run();
      let settled = false;
      const end = (reason?: FinishReason) => {
        if (settled) return;
        settled = true;
        if (reason) finishReason = reason;
        settle.resolve(finish());
      };
      return {
        async next() {
          try {
            const step = await iterator.next();
            if (step.done) end();
            return step;
          } catch (error) {
            settled = true;
            settle.reject(error);
            throw error;
          }
        },
        async return() {
          await iterator.return(undefined);
          end("abort");
          return { done: true, value: undefined };
        },
      };
    },
  };
  return stream;
}

/**
 * The context shift a generation does, with `keep` resolved (-1: the prompt; at most the prompt),
 * or undefined without one or when the generation fits in the context. A shift happens when the
 * sequence holds capacity - 1 tokens; it must leave at least one token to discard.
 */
function contextShiftOf(options: ResolvedGenerateOptions, promptLength: number, capacity: number): { keep: number; discard: number | undefined } | undefined {
  const option = options.contextShift;
  if (option === false || promptLength + options.maxTokens <= capacity) return undefined;
  const given = option === true ? { keep: 0, discard: undefined } : option;
  const keep = given.keep < 0 ? promptLength : Math.min(given.keep, promptLength);
  if (promptLength >= capacity) throw new RangeError(`the prompt (${promptLength} tokens) leaves no room to generate in a context of ${capacity} tokens`);
  const left = capacity - 1 - keep; // tokens after `keep` when the context shifts
  const discard = given.discard ?? Math.floor(left / 2);
  if (discard < 1 || discard > left) {
    const why = given.discard === undefined ? "half of them is none" : `fewer than discard (${discard})`;
    throw new InvalidOptionError("contextShift", `contextShift: keeping ${keep} tokens of a ${capacity}-token context leaves ${left} after them when it shifts, ${why}`);
  }
  return { keep, discard: given.discard };
}

/** A step's logprob and top logprobs from the whole logits. */
function logprobsOfLogits(logits: Float32Array, token: number, count: number): { logprob: number; topLogprobs?: TokenLogprob[] } {
  const logprob = logits[token]! - logSumExp(logits);
  return count === 0 ? { logprob } : { logprob, topLogprobs: topLogprobs(logits, count) };
}

/**
 * A step's logprob and top logprobs from its best candidates and the row's log Σ exp (evaluateTop
 * with logSumExp): the same values the whole logits give (logits[id] - logSumExp(logits)), in
 * the same order (most probable first, equal logits by ascending id).
 */
function logprobsOfTop(top: TopCandidates, token: number, count: number): { logprob: number; topLogprobs?: TokenLogprob[] } {
  const normaliser = top.logSumExp![0]!;
  const at = top.ids.indexOf(token);
  if (at < 0) throw new Error(`the picked token ${token} is not among the step's ${top.ids.length} best candidates`);
  const logprob = top.logits[at]! - normaliser;
  if (count === 0) return { logprob };
  return { logprob, topLogprobs: Array.from(top.ids.subarray(0, count), (id, i) => ({ id, logprob: top.logits[i]! - normaliser })) };
}
