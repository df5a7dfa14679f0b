/**
 * Speculative decoding's drafters: cheap guesses of the tokens that follow a history, which the
 * generation loop then checks with the model in one forward step (EngineSequence.evaluateRows) and
 * keeps while the model's own picks agree. A drafter only changes how many forward steps a
 * generation takes, never its tokens.
 */
import type { EngineSequence } from "../engine/inference-engine";
import type { Model } from "../load-model";
import { InvalidOptionError, type ResolvedGenerateOptions } from "./generation-options";

export type SpeculativeOptions = NonNullable<ResolvedGenerateOptions["speculative"]>;

export interface Drafter {
  /** Up to `most` tokens guessed to follow `history` (possibly none). */
  propose(history: readonly number[], most: number, signal?: AbortSignal): number[] | Promise<number[]>;
  /** Releases what the drafter holds (a draft model's sequence). */
  dispose(): void;
}

/** Draft tokens proposed and draft tokens the model's picks agreed with, over one generation. */
export interface SpeculativeStatistics {
  readonly drafted: number;
  readonly accepted: number;
}

/**
 * Prompt lookup: the tokens that followed the most recent earlier occurrence of the history's last
 * n tokens, for the longest n from ngramMax down to ngramMin that occurs. A continuation that runs
 * into the history's end goes on periodically (an occurrence p tokens back guesses that the last p
 * tokens repeat), so that a loop is drafted `most` tokens at a time.
 */
export function lookupDraft(history: readonly number[], most: number, ngramMin: number, ngramMax: number): number[] {
  const length = history.length;
  for (let size = Math.min(ngramMax, length - 1); size >= ngramMin; size--) {
    const tail = length - size;
    for (let start = tail - 1; start >= 0; start--) {
      let matches = true;
      for (let j = 0; j < size; j++) {
        if (history[start + j] !== history[tail + j]) {
          matches = false;
          break;
        }
      }
      if (!matches) continue;
      const from = start + size;
      const draft: number[] = [];
      for (let i = 0; i < most; i++) {
        const at = from + i;
        draft.push(at < length ? history[at]! : draft[at - length]!);
      }
      return draft;
    }
  }
  return [];
}

class LookupDrafter implements Drafter {
  constructor(
    private readonly ngramMin: number,
    private readonly ngramMax: number,
  ) {}

  propose(history: readonly number[], most: number): number[] {
    return lookupDraft(history, most, this.ngramMin, this.ngramMax);
  }

  dispose(): void {}
}

/**
 * A smaller model drafting greedily on a sequence of its own engine (llama.cpp's draft model): it
 * keeps the longest prefix of its tokens that the history still has, evaluates the rest, and
 * drafts while its best token's probability reaches `minProbability`.
 */
class ModelDrafter implements Drafter {
  private readonly sequence: EngineSequence;

  constructor(
    model: Model,
    private readonly vocabulary: number,
    capacity: number,
    private readonly minProbability: number,
    private readonly prefillChunkTokens: number,
  ) {
    this.sequence = model.engine.createSequence(Math.min(capacity, model.contextLength));
  }

  async propose(history: readonly number[], most: number, signal?: AbortSignal): Promise<number[]> {
    const sequence = this.sequence;
    most = Math.min(most, sequence.capacity - history.length);
    if (most <= 0) return [];
    const known = sequence.tokens;
    const limit = Math.min(known.length, history.length - 1); // at least one token is evaluated
    let common = 0;
    while (common < limit && known[common] === history[common]) common++;
    sequence.rewind(common);
    const draft: number[] = [];
    let next: readonly number[] = history.slice(common);
    let chunkTokens = this.prefillChunkTokens;
    while (draft.length < most) {
      const top = await sequence.evaluateTop(next, 1, signal, chunkTokens, { logSumExp: true });
      if (!top) break;
      const token = top.ids[0]!;
      if (token >= this.vocabulary || Math.exp(top.logits[0]! - top.logSumExp![0]!) < this.minProbability) break;
      draft.push(token);
      next = [token];
      chunkTokens = Number.POSITIVE_INFINITY;
    }
    return draft;
  }

  dispose(): void {
    this.sequence.release();
  }
}

/**
 * The longest suffix of `output` (up to `longest` tokens, at least one) that occurs in `reference`,
 * at the first occurrence from `cursor` on, else at the last before it: the index in `reference`
 * just after that occurrence, or -1 when not even the last token occurs.
 */
export function alignToReference(output: readonly number[], reference: readonly number[], longest: number, cursor: number): number {
  for (let size = Math.min(longest, output.length); size >= 1; size--) {
    const tail = output.length - size;
    let before = -1;
    for (let start = 0; start + size <= reference.length; start++) {
      let matches = true;
      for (let j = 0; j < size; j++) {
        if (reference[start + j] !== output[tail + j]) {
          matches = false;
          break;
        }
      }
      if (!matches) continue;
      if (start + size >= cursor) return start + size;
      before = start + size;
    }
    if (before >= 0) return before;
  }
  return -1;
}

/**
 * Drafts from an expected output (OpenAI's predicted outputs): before the first token, the
 * reference's beginning; then what follows the place in the reference where the output's last
 * tokens are (alignToReference, moving forward through the reference as the output does). Where
 * the output has left the reference, the fallback drafter (if any) drafts.
 */
class ReferenceDrafter implements Drafter {
  /** Where in the reference the output was at the last proposal, and the output's length then. */
  private cursor = 0;
  private outputLength = 0;

  constructor(
    private readonly reference: readonly number[],
    private readonly promptLength: number,
    private readonly longest: number,
    private readonly fallback: Drafter | undefined,
  ) {}

  propose(history: readonly number[], most: number, signal?: AbortSignal): number[] | Promise<number[]> {
    const output = history.slice(this.promptLength);
    const at = output.length === 0 ? 0 : this.follows(output) ? this.cursor + output.length - this.outputLength : alignToReference(output, this.reference, this.longest, this.cursor);
    this.outputLength = output.length;
    if (at >= 0 && at < this.reference.length) {
      this.cursor = at;
      return this.reference.slice(at, at + most);
    }
    return this.fallback ? this.fallback.propose(history, most, signal) : [];
  }

  /** Whether the output's tokens since the last proposal are the reference's from the cursor (it went on along the reference). */
  private follows(output: readonly number[]): boolean {
    const added = output.length - this.outputLength;
    if (this.outputLength === 0 || added <= 0 || this.cursor + added > this.reference.length) return false;
    for (let i = 0; i < added; i++) if (this.reference[this.cursor + i] !== output[this.outputLength + i]) return false;
    return true;
  }

  dispose(): void {
    this.fallback?.dispose();
  }
}

/** Vocabularies checked compatible, per target model. */
const compatible = new WeakMap<Model, WeakSet<Model>>();

/**
 * Throws unless `draft` can draft for `model`: the same token text for every id both have, and
 * vocabulary sizes at most 128 apart (llama.cpp's rule: converters pad vocabularies differently).
 */
export function checkDraftModel(model: Model, draft: Model): void {
  if (compatible.get(model)?.has(draft)) return;
  if (draft === model) throw new InvalidOptionError("speculative.model", "speculative.model is the model itself: a draft model must be a smaller one (or use the ngram method)");
  const difference = Math.abs(model.vocabularySize - draft.vocabularySize);
  if (difference > 128) {
    throw new InvalidOptionError("speculative.model", `speculative.model has ${draft.vocabularySize} tokens, the model ${model.vocabularySize}: a draft model needs the same vocabulary`);
  }
  const shared = Math.min(model.vocabularySize, draft.vocabularySize);
  for (let id = 0; id < shared; id++) {
    const ours = model.tokenizer.tokenText(id);
    const theirs = draft.tokenizer.tokenText(id);
    if (ours !== theirs) throw new InvalidOptionError("speculative.model", `speculative.model's token ${id} is ${JSON.stringify(theirs)}, the model's ${JSON.stringify(ours)}: a draft model needs the same vocabulary`);
  }
  let checked = compatible.get(model);
  if (!checked) compatible.set(model, (checked = new WeakSet()));
  checked.add(draft);
}

/**
 * The drafter of a generation of `model` over `capacity` tokens: from the expected output
 * `prediction` (its tokens; generation starts after `promptLength` tokens) where there is one,
 * else (or where the output leaves it) from the speculative options' method.
 */
export function createDrafter(
  model: Model,
  options: SpeculativeOptions | undefined,
  capacity: number,
  prefillChunkTokens: number,
  prediction?: { readonly tokens: readonly number[]; readonly promptLength: number },
): Drafter | undefined {
  let drafter: Drafter | undefined;
  if (options?.method === "ngram") drafter = new LookupDrafter(options.ngramMin, options.ngramMax);
  else if (options?.method === "draft") {
    checkDraftModel(model, options.model);
    drafter = new ModelDrafter(options.model, model.vocabularySize, capacity, options.minProbability, prefillChunkTokens);
  }
  if (!prediction || prediction.tokens.length === 0) return drafter;
  return new ReferenceDrafter(prediction.tokens, prediction.promptLength, options?.method === "ngram" ? options.ngramMax : DEFAULT_NGRAM_MAX, drafter);
}

const DEFAULT_NGRAM_MAX = 4;
