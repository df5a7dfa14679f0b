import type { Model } from "../load-model";

export interface PrimeGateResult {
  /** Largest |prefill − decode| over all logits of all positions. */
  readonly maxAbsoluteDifference: number;
  /** Positions whose argmax differs although the prefill top-1/top-2 margin was at least the bound. */
  readonly argmaxMismatches: number[];
  /** Positions whose argmax differs with a margin below the bound (allowed near-ties). */
  readonly nearTieFlips: number[];
}

/**
 * The seed's "prime gate": logits of one batched prefill over `tokens` against logits of feeding
 * the same tokens one at a time through the KV cache.
 */
export function primeGate(model: Model, tokens: readonly number[], marginBound: number): PrimeGateResult {
  const vocabulary = model.vocabularySize;
  const prefill = model.forward(tokens, model.createCache(tokens.length), { logits: "all" });
  const cache = model.createCache(tokens.length);
  let maxAbsoluteDifference = 0;
  const argmaxMismatches: number[] = [];
  const nearTieFlips: number[] = [];
  for (let position = 0; position < tokens.length; position++) {
    const decode = model.forward([tokens[position]!], cache);
    const row = prefill.subarray(position * vocabulary, (position + 1) * vocabulary);
    for (let i = 0; i < vocabulary; i++) maxAbsoluteDifference = Math.max(maxAbsoluteDifference, Math.abs(row[i]! - decode[i]!));
    const [first, second] = topTwo(row);
    const decodeFirst = topTwo(decode)[0].id;
    if (decodeFirst !== first.id) {
      (first.value - second.value >= marginBound ? argmaxMismatches : nearTieFlips).push(position);
    }
  }
  return { maxAbsoluteDifference, argmaxMismatches, nearTieFlips };
}

function topTwo(values: Float32Array): [{ id: number; value: number }, { id: number; value: number }] {
  let first = { id: -1, value: -Infinity };
  let second = { id: -1, value: -Infinity };
  for (let i = 0; i < values.length; i++) {
    const value = values[i]!;
    if (value > first.value) {
      second = first;
      first = { id: i, value };
    } else if (value > second.value) {
      second = { id: i, value };
    }
  }
  return [first, second];
}
