import type { SampleResult, Sampler } from "../sampler";
import { type ConstrainedSampler, type GrammarMode, createConstrainedSampler } from "./constrained-sampler";
import type { GrammarMatcher } from "./grammar-matcher";

export interface TriggeredSampler extends Sampler {
  readonly matcher: GrammarMatcher;
  /** Whether the trigger has appeared (the grammar governs from it on). */
  readonly triggered: boolean;
  /** Triggered, and nothing but end of generation can follow. */
  readonly isFinished: boolean;
  /**
   * Before the trigger: a token the wrapped sampler picked outside `sample` (its `sampleTop`, or a
   * greedy pick on the GPU), taken into the output as if `sample` had returned it. Untriggered,
   * `sample` is the wrapped sampler's pick followed by this, so a caller may pick the free tokens
   * where the logits are; once `triggered`, only `sample` may be used.
   */
  observe(token: number): void;
}

/** A block at the start of the output in which the trigger is not looked for (Qwen3's `<think>…</think>`). */
export interface LeadingBlock {
  readonly open: string;
  readonly close: string;
}

export interface TriggeredSamplerOptions {
  readonly mode?: GrammarMode;
  /**
   * When the output begins with `open` (after ASCII whitespace), the trigger is looked for only
   * after the `close` that follows, as llama.cpp's trigger pattern for Qwen3 skips a leading think
   * block: a call the model drafts while reasoning is not one.
   */
  readonly leadingBlock?: LeadingBlock;
}

function find(bytes: Uint8Array, pattern: Uint8Array): number {
  outer: for (let i = 0; i + pattern.length <= bytes.length; i++) {
    for (let j = 0; j < pattern.length; j++) if (bytes[i + j] !== pattern[j]) continue outer;
    return i;
  }
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function isAsciiSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/**
 * llama.cpp's lazy grammar (`grammar_lazy` with a word trigger): tokens are sampled freely until
 * the output contains `trigger` (across token boundaries too); from the trigger's first byte on,
 * the output must follow the grammar, which starts with the trigger. Until then end of generation
 * is free. A token whose bytes after the trigger the grammar refuses leaves the trigger unfired
 * (the text stays free). See `TriggeredSamplerOptions.leadingBlock` for a block skipped first.
 */
export function createTriggeredSampler(sampler: Sampler, matcher: GrammarMatcher, trigger: string, options: TriggeredSamplerOptions = {}): TriggeredSampler {
  const encoder = new TextEncoder();
  const pattern = encoder.encode(trigger);
  if (pattern.length === 0) throw new RangeError("the grammar trigger must not be empty");
  const open = options.leadingBlock ? encoder.encode(options.leadingBlock.open) : undefined;
  const close = options.leadingBlock ? encoder.encode(options.leadingBlock.close) : undefined;
  if ((open && open.length === 0) || (close && close.length === 0)) throw new RangeError("the leading block's open and close must not be empty");
  // "start": deciding whether the output opens the leading block; "inside" it, until its close; "armed": looking for the trigger.
  let phase: "start" | "inside" | "armed" = open ? "start" : "armed";
  let pending: Uint8Array = new Uint8Array(0); // start: the output so far; inside: the last close.length - 1 bytes; armed: the last pattern.length - 1 bytes
  let constrained: ConstrainedSampler | undefined;

  /** The bytes the trigger is to be looked for in, after this piece; undefined while the leading block lasts. */
  const afterLeadingBlock = (piece: Uint8Array): Uint8Array | undefined => {
    if (phase === "start") {
      const output = concat(pending, piece);
      let first = 0;
      while (first < output.length && isAsciiSpace(output[first]!)) first++;
      const rest = output.subarray(first);
      const shared = Math.min(rest.length, open!.length);
      let matches = true;
      for (let i = 0; i < shared && matches; i++) matches = rest[i] === open![i];
      if (!matches) {
        phase = "armed";
        pending = new Uint8Array(0);
        return output;
      }
      if (rest.length < open!.length) {
        pending = output;
        return undefined;
      }
      phase = "inside";
      pending = new Uint8Array(0);
      piece = rest.slice(open!.length);
    }
    if (phase === "inside") {
      const bytes = concat(pending, piece);
      const at = find(bytes, close!);
      if (at < 0) {
        pending = bytes.slice(Math.max(0, bytes.length - (close!.length - 1)));
        return undefined;
      }
      phase = "armed";
      pending = new Uint8Array(0);
      return bytes.slice(at + close!.length);
    }
    return piece;
  };

  const observe = (token: number): void => {
    if (constrained) throw new Error("observe: the trigger has fired; tokens must come from sample (the grammar governs them)");
    if (matcher.trie.isEndOfGeneration(token)) return;
    const piece = afterLeadingBlock(matcher.trie.piece(token));
    if (piece === undefined) return;
    const bytes = concat(pending, piece);
    const at = find(bytes, pattern);
    if (at >= 0) {
      matcher.reset();
      if (matcher.tryAcceptBytes(bytes.subarray(at))) {
        constrained = createConstrainedSampler(sampler, matcher, options.mode);
        return;
      }
    }
    pending = bytes.slice(Math.max(0, bytes.length - (pattern.length - 1)));
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
      phase = open ? "start" : "armed";
      pending = new Uint8Array(0);
      constrained = undefined;
    },
    sample(logits: Float32Array, history: ArrayLike<number>): SampleResult {
      if (constrained) return constrained.sample(logits, history);
      const result = sampler.sample(logits, history);
      observe(result.token);
      return result;
    },
    observe,
  };
}
