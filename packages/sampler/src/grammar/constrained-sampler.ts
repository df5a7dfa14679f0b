import type { SampleResult, Sampler } from "../sampler";
import { SamplerError } from "../sampler-error";
import { GrammarError } from "./grammar-error";
import type { GrammarMatcher } from "./grammar-matcher";

/**
 * How the grammar meets the sampler. "lazy" (llama.cpp's default): sample without the grammar,
 * keep the token when the grammar accepts it (checking one token is cheap), otherwise mask the
 * logits to the allowed tokens and sample again. "full": mask before every sample, so the
 * distribution is exactly the model's restricted to the grammar.
 */
export type GrammarMode = "lazy" | "full";

export interface ConstrainedSampler extends Sampler {
  readonly matcher: GrammarMatcher;
  /** Steps where the full mask was computed (every step in "full" mode; only rejections in "lazy"). */
  readonly maskedSteps: number;
}

/**
 * A sampler whose every token the grammar allows, advancing the matcher by it. End of generation
 * is allowed only once the grammar has matched a whole input; special tokens never. A token the
 * grammar allows is always found: when none exists the error says so instead of sampling garbage.
 */
export function createConstrainedSampler(sampler: Sampler, matcher: GrammarMatcher, mode: GrammarMode = "lazy"): ConstrainedSampler {
  const vocabularySize = matcher.trie.vocabularySize;
  const masked = new Float32Array(vocabularySize); // [vocabulary] logits with disallowed tokens at -Infinity
  let maskedSteps = 0;

  const sampleMasked = (logits: Float32Array, history: ArrayLike<number>): SampleResult => {
    maskedSteps++;
    const allowed = matcher.allowedTokens();
    masked.fill(Number.NEGATIVE_INFINITY);
    const tokens = allowed.tokens;
    for (let i = 0; i < tokens.length; i++) masked[tokens[i]!] = logits[tokens[i]!]!;
    if (allowed.endOfGeneration) for (const token of matcher.trie.endOfGeneration) masked[token] = logits[token]!;
    if (tokens.length === 0 && !allowed.endOfGeneration) throw new GrammarError("no token of the vocabulary can continue the grammar here");
    let result: SampleResult;
    try {
      result = sampler.sample(masked, history);
    } catch (error) {
      if (error instanceof SamplerError) throw new GrammarError(`no allowed token can be sampled: ${error.message}`);
      throw error;
    }
    return result;
  };

  return {
    matcher,
    get maskedSteps() {
      return maskedSteps;
    },
    get seed() {
      return sampler.seed;
    },
    get options() {
      return sampler.options;
    },
    reset() {
      sampler.reset();
      matcher.reset();
      maskedSteps = 0;
    },
    sample(logits: Float32Array, history: ArrayLike<number>): SampleResult {
      if (logits.length !== vocabularySize) throw new SamplerError(`logits have ${logits.length} entries, the grammar's vocabulary ${vocabularySize}`);
      let result: SampleResult | undefined;
      if (mode === "lazy") {
        const first = sampler.sample(logits, history);
        if (matcher.accepts(first.token)) result = first;
      }
      result ??= sampleMasked(logits, history);
      matcher.accept(result.token);
      return result;
    },
  };
}
