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
    this.sequence = model.engine.createSequence(Math.min(capacity, model.config.contextLength));
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

/** The drafter of the speculative options, for a generation of `model` over `capacity` tokens. */
export function createDrafter(model: Model, options: SpeculativeOptions, capacity: number, prefillChunkTokens: number): Drafter {
  if (options.method === "ngram") return new LookupDrafter(options.ngramMin, options.ngramMax);
  checkDraftModel(model, options.model);
  return new ModelDrafter(options.model, model.vocabularySize, capacity, options.minProbability, prefillChunkTokens);
}
