import type { Candidates } from "./candidates";

export interface PenaltyOptions {
  /** How many of the most recent history tokens are penalized: -1 all of them, 0 none. */
  readonly lastN: number;
  /** Repeat penalty: a seen token's logit is divided by it when positive, multiplied when not. 1 = off. */
  readonly repeat: number;
  /** Subtracted once per occurrence of the token among the last N. 0 = off. */
  readonly frequency: number;
  /** Subtracted once if the token occurs among the last N. 0 = off. */
  readonly presence: number;
}

function penalize(logits: Float32Array, i: number, count: number, repeat: number, frequency: number, presence: number): void {
  const logit = logits[i]!;
  const repeated = Math.fround(logit <= 0 ? logit * repeat : logit / repeat);
  logits[i] = repeated - Math.fround(Math.fround(count * frequency) + presence);
}

/** Whether `applyPenalties` would change anything with these options (llama.cpp's early return). */
export function penaltiesEnabled(options: PenaltyOptions): boolean {
  return options.lastN !== 0 && (options.repeat !== 1 || options.frequency !== 0 || options.presence !== 0);
}

/**
 * llama.cpp's `llama_sampler_penalties`: for every candidate whose token occurs `count` > 0 times
 * among the last `lastN` tokens of `history`,
 *   logit = logit <= 0 ? logit * repeat : logit / repeat
 *   logit -= count * frequency + presence
 * in float32 arithmetic. `counts` is a zeroed work array of at least the vocabulary size (left
 * zeroed); without it one is allocated. History tokens outside [0, counts.length) are ignored.
 */
export function applyPenalties(candidates: Candidates, history: ArrayLike<number>, options: PenaltyOptions, counts: Int32Array = new Int32Array(candidates.capacity)): void {
  if (!penaltiesEnabled(options)) return;
  const start = options.lastN < 0 ? 0 : Math.max(0, history.length - options.lastN);
  const end = history.length;
  if (start === end) return;
  const repeat = Math.fround(options.repeat);
  const frequency = Math.fround(options.frequency);
  const presence = Math.fround(options.presence);
  const { ids, logits, length } = candidates;
  const vocabulary = counts.length;
  for (let h = start; h < end; h++) {
    const token = history[h]!;
    if (token >= 0 && token < vocabulary) counts[token]!++;
  }
  // Candidates in token order are found at position == id; the rest by one pass over the candidates.
  let search = false;
  for (let h = start; h < end; h++) {
    const token = history[h]!;
    if (!(token >= 0 && token < vocabulary)) continue;
    const count = counts[token]!;
    if (count === 0) continue; // already applied
    if (token < length && ids[token] === token) {
      penalize(logits, token, count, repeat, frequency, presence);
      counts[token] = 0;
    } else {
      search = true;
    }
  }
  if (search) {
    for (let i = 0; i < length; i++) {
      const id = ids[i]!;
      if (id === i) continue;
      const count = counts[id]!;
      if (count > 0) penalize(logits, i, count, repeat, frequency, presence);
    }
  }
  for (let h = start; h < end; h++) {
    const token = history[h]!;
    if (token >= 0 && token < vocabulary) counts[token] = 0;
  }
  candidates.sorted = false;
}
