import type { Candidates } from "./candidates";

/** Token id → value added to its logit; -Infinity bans the token. */
export type LogitBias = ReadonlyMap<number, number> | Readonly<Record<number, number>>;

/** A logit bias as two parallel arrays, made once so that applying it allocates nothing. */
export class PreparedLogitBias {
  readonly tokens: Int32Array; // [entries]
  readonly biases: Float32Array; // [entries]

  constructor(bias: LogitBias) {
    const entries: [number, number][] = bias instanceof Map ? [...bias] : Object.entries(bias).map(([token, value]) => [Number(token), value as number]);
    this.tokens = Int32Array.from(entries.map(([token]) => token));
    this.biases = Float32Array.from(entries.map(([, value]) => value));
  }
}

/**
 * llama.cpp's logit-bias sampler: adds each token's bias to its logit (in float32). A candidate is
 * found at position `token` when the candidates are still in token order, else by a search, so it
 * may be applied at any point of a chain. Tokens that are not candidates are ignored.
 */
export function applyLogitBias(candidates: Candidates, bias: LogitBias | PreparedLogitBias): void {
  const prepared = bias instanceof PreparedLogitBias ? bias : new PreparedLogitBias(bias);
  const { tokens, biases } = prepared;
  const { ids, logits, length } = candidates;
  let search = false;
  for (let j = 0; j < tokens.length; j++) {
    const token = tokens[j]!;
    if (token >= 0 && token < length && ids[token] === token) logits[token] = logits[token]! + biases[j]!;
    else search = true;
  }
  if (!search) return;
  // Candidates out of token order: those at position == id were handled above.
  for (let i = 0; i < length; i++) {
    const id = ids[i]!;
    if (id === i) continue;
    for (let j = 0; j < tokens.length; j++) {
      if (tokens[j] === id) {
        logits[i] = logits[i]! + biases[j]!;
        break;
      }
    }
  }
}
