import type { Candidates } from "./candidates";
import { SamplerError } from "./sampler-error";

/** The sequence breakers after llama.cpp's preprocessing: head token → tails that complete it. */
export class DrySequenceBreakers {
  /** Head token → the token sequences that must follow it (an empty tail: the head alone breaks). */
  readonly heads: ReadonlyMap<number, readonly Int32Array[]>;
  /** Heads with an empty tail: tokens whose text contains a whole breaker. DRY never penalizes them. */
  readonly singleTokenBreakers: ReadonlySet<number>;

  private constructor(heads: Map<number, Int32Array[]>) {
    this.heads = heads;
    this.singleTokenBreakers = new Set([...heads].filter(([, tails]) => tails.some((tail) => tail.length === 0)).map(([head]) => head));
  }

  static readonly none = new DrySequenceBreakers(new Map());

  /**
   * Breakers given as token sequences, as llama.cpp's `llama_sampler_init_dry_testing`: the first
   * token is the head, the rest the tail.
   */
  static fromTokenSequences(sequences: readonly (readonly number[])[]): DrySequenceBreakers {
    const heads = new Map<number, Int32Array[]>();
    for (const sequence of sequences) {
      if (sequence.length === 0) continue;
      addTail(heads, sequence[0]!, Int32Array.from(sequence.slice(1)));
    }
    return new DrySequenceBreakers(heads);
  }

  /**
   * Breakers given as text, as llama.cpp's `get_overlapping_token_sequences`: every token whose
   * text contains a breaker is a single-token breaker; a token whose text ends with the start of a
   * breaker is a head whose tail is the tokenization of the rest of the breaker (at most 20 tokens;
   * only when `tokenize` is given). Breakers are cut to 40 UTF-8 bytes (not inside a character).
   * Texts are compared as JavaScript strings, where llama.cpp compares bytes: a token that is part
   * of a UTF-8 character matches only through the text `tokenText` gives it.
   */
  static fromStrings(
    breakers: readonly string[],
    vocabularySize: number,
    tokenText: (id: number) => string,
    tokenize?: (text: string) => ArrayLike<number>,
  ): DrySequenceBreakers {
    const heads = new Map<number, Int32Array[]>();
    const strings = breakers.filter((breaker) => breaker.length > 0).map(truncateUtf8);
    if (strings.length === 0) return new DrySequenceBreakers(heads);
    const tailCache = new Map<string, Int32Array>();
    for (let id = 0; id < vocabularySize; id++) {
      const word = tokenText(id);
      for (const breaker of strings) {
        if (word.includes(breaker)) {
          addTail(heads, id, new Int32Array(0));
          continue;
        }
        if (!tokenize) continue;
        const first = breaker[0]!;
        for (let position = word.indexOf(first); position >= 0; position = word.indexOf(first, position + 1)) {
          let matched = 1;
          while (matched < breaker.length && position + matched < word.length && word[position + matched] === breaker[matched]) matched++;
          if (matched < breaker.length && position + matched < word.length) continue; // a mismatch before the word ended
          const rest = breaker.slice(matched);
          let tail = tailCache.get(rest);
          if (!tail) {
            tail = Int32Array.from(Array.from(tokenize(rest)).slice(0, MAX_TAIL_TOKENS));
            tailCache.set(rest, tail);
          }
          addTail(heads, id, tail);
        }
      }
    }
    return new DrySequenceBreakers(heads);
  }
}

const MAX_BREAKER_BYTES = 40;
const MAX_TAIL_TOKENS = 20;

function truncateUtf8(text: string): string {
  let bytes = 0;
  let end = 0;
  for (const character of text) {
    const codePoint = character.codePointAt(0)!;
    const size = codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
    if (bytes + size > MAX_BREAKER_BYTES) break;
    bytes += size;
    end += character.length;
  }
  return text.slice(0, end);
}

function addTail(heads: Map<number, Int32Array[]>, head: number, tail: Int32Array): void {
  const tails = heads.get(head);
  if (!tails) {
    heads.set(head, [tail]);
    return;
  }
  const duplicate = tails.some((existing) => existing.length === tail.length && existing.every((token, i) => token === tail[i]));
  if (!duplicate) tails.push(tail);
}

export interface DryOptions {
  /** Penalty scale; 0 = off. */
  readonly multiplier: number;
  /** Penalty = multiplier · base^(repeat length − allowedLength); below 1 = off. */
  readonly base: number;
  /** Repeats up to this length are not penalized. */
  readonly allowedLength: number;
  /** How many of the most recent history tokens are scanned: -1 all of them, 0 = off. */
  readonly penaltyLastN: number;
  readonly sequenceBreakers: DrySequenceBreakers;
}

/** Whether `applyDry` would change anything with these options (llama.cpp's early return). */
export function dryEnabled(options: Omit<DryOptions, "sequenceBreakers">): boolean {
  return options.multiplier !== 0 && options.base >= 1 && options.penaltyLastN !== 0;
}

/** Reusable work arrays for `applyDry`, so that it allocates nothing per token. */
export class DryWorkspace {
  reversed = new Int32Array(64); // [window] history, most recent first
  zValues = new Int32Array(64); // [window] repeat length of the suffix ending k tokens back
  touched = new Int32Array(64); // [window] tokens with an entry in repeatByToken
  readonly repeatByToken: Int32Array; // [vocabulary] longest repeat the token would extend, plus 1 (0: none)

  constructor(vocabularySize: number) {
    this.repeatByToken = new Int32Array(vocabularySize);
  }

  ensure(window: number): void {
    if (this.reversed.length >= window) return;
    const size = Math.max(window, this.reversed.length * 2);
    this.reversed = new Int32Array(size);
    this.zValues = new Int32Array(size);
    this.touched = new Int32Array(size);
  }
}

const FLOAT_MAX_LOG = Math.fround(88.7228391);

function penalize(
  position: number,
  token: number,
  logits: Float32Array,
  repeatByToken: Int32Array,
  singleTokenBreakers: ReadonlySet<number>,
  allowedLength: number,
  maxExponent: number,
  multiplier: number,
  base: number,
): void {
  if (singleTokenBreakers.has(token)) return;
  let exponent = repeatByToken[token]! - 1 - allowedLength;
  if (maxExponent > 0 && exponent > maxExponent) exponent = maxExponent;
  logits[position] = logits[position]! - Math.fround(multiplier * Math.pow(base, exponent));
}

/**
 * llama.cpp's DRY ("don't repeat yourself", from koboldcpp): a candidate that would extend a
 * sequence that already occurred in the last `penaltyLastN` tokens of `history`, where the
 * repeated part is at least `allowedLength` tokens long, loses
 *   multiplier · base^(length − allowedLength)
 * from its logit (the exponent capped so that the power stays a finite float). A sequence breaker
 * in the history limits how far back a repeat can reach; single-token breakers are never penalized.
 * Repeat lengths come from the Z-algorithm over the reversed window, as in llama.cpp.
 */
export function applyDry(candidates: Candidates, history: ArrayLike<number>, options: DryOptions, workspace: DryWorkspace = new DryWorkspace(candidates.capacity)): void {
  if (!dryEnabled(options)) return;
  const { allowedLength } = options;
  const heads = options.sequenceBreakers.heads;
  const window = Math.min(history.length, options.penaltyLastN < 0 ? history.length : options.penaltyLastN);
  if (window <= allowedLength) return;
  if (workspace.repeatByToken.length < candidates.capacity) throw new SamplerError("DRY workspace is smaller than the vocabulary");
  workspace.ensure(window);
  const { reversed, zValues, touched, repeatByToken } = workspace;
  for (let i = 0; i < window; i++) reversed[i] = history[history.length - 1 - i]!;

  // Step 1: the most recent sequence breaker limits how long a repeat may be.
  let repeatLimit = window;
  for (let i = 0; i < window; i++) {
    const tails = heads.get(reversed[i]!);
    if (!tails) continue;
    let longest = -1;
    for (const tail of tails) {
      const length = tail.length;
      if (length <= longest || length > i) continue;
      let match = true;
      for (let offset = 0; offset < length; offset++) {
        if (tail[offset] !== reversed[i - offset - 1]) {
          match = false;
          break;
        }
      }
      if (match) longest = length;
    }
    if (longest >= 0) {
      repeatLimit = i - longest;
      break;
    }
  }
  if (repeatLimit < allowedLength) return;

  // Step 2: zValues[k] = length of the longest common prefix of reversed and reversed[k..], i.e.
  // how many tokens before and including history position (end - 1 - k) repeat the most recent ones.
  let left = 0;
  let right = 0; // exclusive end of the rightmost match found
  for (let k = 1; k < window; k++) {
    let z = k < right ? Math.min(right - k, zValues[k - left]!) : 0;
    while (k + z < window && reversed[z] === reversed[k + z]) z++;
    zValues[k] = z;
    if (k + z > right) {
      left = k;
      right = k + z;
    }
  }

  // Step 3: the token that followed each repeat would extend it; keep each token's longest.
  let touchedCount = 0;
  const vocabulary = repeatByToken.length;
  for (let k = 1; k < window; k++) {
    const length = Math.min(zValues[k]!, repeatLimit);
    if (length < allowedLength) continue;
    const token = reversed[k - 1]!;
    if (!(token >= 0 && token < vocabulary)) continue;
    const stored = repeatByToken[token]!;
    if (stored === 0) touched[touchedCount++] = token;
    if (stored < length + 1) repeatByToken[token] = length + 1;
  }

  // Step 4: penalize, found at position == id while the candidates are in token order, else by search.
  const multiplier = Math.fround(options.multiplier);
  const base = Math.fround(options.base);
  const maxExponent = base > Math.fround(1.000001) ? Math.trunc(Math.fround(FLOAT_MAX_LOG / Math.fround(Math.log(base)))) : 0;
  const singleTokenBreakers = options.sequenceBreakers.singleTokenBreakers;
  const { ids, logits, length } = candidates;
  let search = false;
  for (let j = 0; j < touchedCount; j++) {
    const token = touched[j]!;
    if (token < length && ids[token] === token) penalize(token, token, logits, repeatByToken, singleTokenBreakers, allowedLength, maxExponent, multiplier, base);
    else search = true;
  }
  if (search) {
    for (let i = 0; i < length; i++) {
      const id = ids[i]!;
      if (id !== i && id >= 0 && id < vocabulary && repeatByToken[id]! > 0) penalize(i, id, logits, repeatByToken, singleTokenBreakers, allowedLength, maxExponent, multiplier, base);
    }
  }
  for (let j = 0; j < touchedCount; j++) repeatByToken[touched[j]!] = 0;
  candidates.sorted = false;
}
