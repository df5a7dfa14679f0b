import { expect } from "vitest";
import { createSampler } from "../../sampler";
import { SeededRandom } from "../../seeded-random";
import { type GrammarMode, createConstrainedSampler } from "../constrained-sampler";
import type { GrammarAutomaton } from "../grammar-automaton";
import { GrammarMatcher } from "../grammar-matcher";
import { qwen3TokenPieces } from "./qwen3-token-pieces";

const decoder = new TextDecoder("utf-8", { fatal: true });

/** 2^20 normal draws, standard deviation 3 (Box-Muller, two normals per draw), made once. */
let normalPool: Float32Array | undefined;
function normals(): Float32Array {
  if (normalPool) return normalPool;
  const random = new SeededRandom(20260101, 3);
  normalPool = new Float32Array(1 << 20);
  for (let i = 0; i < normalPool.length; i += 2) {
    const radius = 3 * Math.sqrt(-2 * Math.log(1 - random.nextDouble()));
    const angle = 2 * Math.PI * random.nextDouble();
    normalPool[i] = radius * Math.cos(angle);
    normalPool[i + 1] = radius * Math.sin(angle);
  }
  return normalPool;
}

/**
 * Samples one output under the grammar from random logits (a "model" of random weights: every
 * step a window of the normal pool at a random offset, a normal draw per token, standard deviation 3)
 * at temperature 1 with no truncation, until end of generation or the grammar is finished. (A fresh
 * Box-Muller draw of 151,936 logits per step was a third of this file's 40 s.)
 */
export function sampleOutput(automaton: GrammarAutomaton, seed: number, mode: GrammarMode): string {
  const { trie } = qwen3TokenPieces();
  const matcher = new GrammarMatcher(automaton, trie);
  const sampler = createConstrainedSampler(createSampler({ temperature: 1, topK: 0, topP: 1, minP: 0, seed }, { vocabularySize: trie.vocabularySize }), matcher, mode);
  const random = new SeededRandom(seed, 9);
  const logits = new Float32Array(trie.vocabularySize);
  const bytes: number[] = [];
  for (let step = 0; step < 2000; step++) {
    const pool = normals();
    const offset = Math.floor(random.nextDouble() * (pool.length - logits.length));
    logits.set(pool.subarray(offset, offset + logits.length));
    const { token } = sampler.sample(logits, []);
    if (trie.isEndOfGeneration(token)) break;
    bytes.push(...trie.piece(token));
    if (matcher.isFinished) break;
  }
  expect(matcher.isAccepting || matcher.isFinished).toBe(true);
  return decoder.decode(Uint8Array.from(bytes));
}

