import type { SampleResult, Sampler } from "../sampler";
import { type ConstrainedSampler, type GrammarMode, createConstrainedSampler } from "./constrained-sampler";
import type { GrammarMatcher } from "./grammar-matcher";

export interface TriggeredSampler extends Sampler {
  readonly matcher: GrammarMatcher;
  /** Whether the trigger has appeared (the grammar governs from it on). */
  readonly triggered: boolean;
  /** Triggered, and nothing but end of generation can follow. */
  readonly isFinished: boolean;
}

/**
 * llama.cpp's lazy grammar (`grammar_lazy` with a word trigger): tokens are sampled freely until
 * the output contains `trigger` (across token boundaries too); from the trigger's first byte on,
 * the output must follow the grammar, which starts with the trigger. Until then end of generation
 * is free. A token whose bytes after the trigger the grammar refuses leaves the trigger unfired
 * (the text stays free).
 */
export function createTriggeredSampler(sampler: Sampler, matcher: GrammarMatcher, trigger: string, mode: GrammarMode = "lazy"): TriggeredSampler {
  const pattern = new TextEncoder().encode(trigger);
  if (pattern.length === 0) throw new RangeError("the grammar trigger must not be empty");
  let tail = new Uint8Array(0); // the last pattern.length - 1 bytes of the output
  let constrained: ConstrainedSampler | undefined;

  const find = (bytes: Uint8Array): number => {
    outer: for (let i = 0; i + pattern.length <= bytes.length; i++) {
      for (let j = 0; j < pattern.length; j++) if (bytes[i + j] !== pattern[j]) continue outer;
      return i;
    }
    return -1;
  };

  return {
    matcher,
    get triggered() {
      return constrained !== undefined;
    },
    get isFinished() {
      return constrained !== undefined && matcher.isFinished;
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
      tail = new Uint8Array(0);
      constrained = undefined;
    },
    sample(logits: Float32Array, history: ArrayLike<number>): SampleResult {
      if (constrained) return constrained.sample(logits, history);
      const result = sampler.sample(logits, history);
      if (matcher.trie.isEndOfGeneration(result.token)) return result;
      const piece = matcher.trie.piece(result.token);
      const bytes = new Uint8Array(tail.length + piece.length);
      bytes.set(tail);
      bytes.set(piece, tail.length);
      const at = find(bytes);
      if (at >= 0) {
        matcher.reset();
        if (matcher.tryAcceptBytes(bytes.subarray(at))) {
          constrained = createConstrainedSampler(sampler, matcher, mode);
          return result;
        }
      }
      tail = bytes.slice(Math.max(0, bytes.length - (pattern.length - 1)));
      return result;
    },
  };
}
