import { StopSequenceMatcher, createSampler } from "@memra/sampler";
import { logSumExp } from "../evaluation";
import type { KVCache } from "../kv-cache";
import type { Model } from "../load-model";
import type { ResolvedGenerateOptions } from "./generation-options";
import type { FinishReason, GenerationChunk, GenerationResult, GenerationStream } from "./generation-types";

/** Lets timers and abort events run between forward steps (the reference backend is synchronous). */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface GenerationRequest {
  readonly model: Model;
  readonly promptTokens: readonly number[];
  /** A cache whose first `cachedTokens` rows already hold promptTokens[0..cachedTokens). */
  readonly cache: KVCache;
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
export function generateTokens(request: GenerationRequest): GenerationStream {
  const { model, promptTokens, cache, options } = request;
  if (promptTokens.length === 0) throw new RangeError("the prompt has no tokens");
  if (request.cachedTokens >= promptTokens.length) throw new RangeError("at least the last prompt token must be evaluated");
  if (promptTokens.length + options.maxTokens > cache.capacity) {
    throw new RangeError(`prompt (${promptTokens.length} tokens) + maxTokens (${options.maxTokens}) exceeds the context of ${cache.capacity} tokens`);
  }

  let settle!: { resolve: (result: GenerationResult) => void; reject: (error: unknown) => void };
  const result = new Promise<GenerationResult>((resolve, reject) => {
    settle = { resolve, reject };
  });
  result.catch(() => {}); // the iteration rethrows; an unread result must not be an unhandled rejection

  const tokenizer = model.tokenizer;
  const stops = options.stop === undefined ? [] : Array.isArray(options.stop) ? options.stop : [options.stop];
  const generated: number[] = [];
  let text = "";
  let finishReason: FinishReason = "length";
  let stopString: string | undefined;
  let prefillMs = 0;
  let decodeStarted = 0;
  const sampler = createSampler(options, { vocabularySize: model.vocabularySize, tokenText: (id) => tokenizer.tokenText(id) });

  const finish = (): GenerationResult => {
    const decodeMs = decodeStarted === 0 ? 0 : performance.now() - decodeStarted;
    const evaluated = promptTokens.length - request.cachedTokens;
    const final: GenerationResult = {
      text,
      promptTokens: [...promptTokens],
      tokens: generated,
      finishReason,
      seed: sampler.seed,
      ...(stopString === undefined ? {} : { stop: stopString }),
      usage: { promptTokens: promptTokens.length, completionTokens: generated.length, cachedPromptTokens: request.cachedTokens },
      timings: {
        prefillMs,
        decodeMs,
        prefillTokensPerSecond: prefillMs > 0 ? (evaluated / prefillMs) * 1000 : 0,
        decodeTokensPerSecond: decodeMs > 0 && generated.length > 1 ? ((generated.length - 1) / decodeMs) * 1000 : 0,
      },
    };
    request.onFinish?.(final);
    return final;
  };

  async function* run(): AsyncGenerator<GenerationChunk> {
    const matcher = new StopSequenceMatcher(stops);
    const decoder = tokenizer.createStreamingDecoder();
    const history: number[] = [...promptTokens];
    const aborted = () => options.signal?.aborted === true;
    cache.trim(request.cachedTokens);

    // Prefill, a chunk at a time so that an abort is seen within one chunk.
    const prefillStarted = performance.now();
    let logits: Float32Array = new Float32Array(0);
    const rest = promptTokens.slice(request.cachedTokens);
    for (let start = 0; start < rest.length && !aborted(); start += options.prefillChunkTokens) {
      const chunk = rest.slice(start, start + options.prefillChunkTokens);
      logits = model.forward(chunk, cache, { logits: start + chunk.length >= rest.length ? "last" : [] });
      await yieldToEventLoop();
    }
    prefillMs = performance.now() - prefillStarted;
    if (aborted()) {
      finishReason = "abort";
      return;
    }

    // Decode: sample, stream, feed the token back.
    decodeStarted = performance.now();
    while (true) {
      const { token } = sampler.sample(logits, history);
      generated.push(token);
      history.push(token);
      if (tokenizer.isEndOfGeneration(token)) {
        finishReason = "stop";
        break;
      }
      const step = matcher.push(decoder.push(token));
      text += step.text;
      yield options.logprobs ? { text: step.text, token, logprob: logits[token]! - logSumExp(logits) } : { text: step.text, token };
      if (step.stopped) {
        finishReason = "stop";
        stopString = step.stop;
        return;
      }
      if (generated.length >= options.maxTokens) break;
      await yieldToEventLoop();
      if (aborted()) {
        finishReason = "abort";
        break;
      }
      logits = model.forward([token], cache);
    }
    // Text held back (an incomplete character, a possible start of a stop string) is final now.
    const tail = matcher.push(decoder.flush()).text + matcher.flush();
    if (tail) {
      text += tail;
      yield { text: tail };
    }
  }

  let started = false;
  return {
    result,
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
}
