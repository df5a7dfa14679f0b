import { mulberry32 } from "@memra/synthetic";

/**
 * Seeded logit vectors shared by tools/llamacpp/sampler-goldens.ts (which records llama.cpp's
 * samplers on them) and the tests (which run memra's on the same vectors), so that the golden file
 * holds the settings and llama.cpp's results, not the logits.
 */
export interface LogitsSpec {
  /**
   * - "zipf": a random permutation of −exponent·ln(rank) plus noise of standard deviation 0.3
   *   (probabilities falling as a power of the rank, as a language model's roughly do; Mirostat's model)
   * - "normal": scale · N(0, 1)
   * - "peaked": N(0, 1) with two tokens raised by 12 and 10
   * - "flat": uniform in [0, scale)
   */
  readonly kind: "zipf" | "normal" | "peaked" | "flat";
  readonly vocabularySize: number;
  readonly seed: number;
  /** zipf: the exponent; normal, flat: the scale. */
  readonly parameter?: number;
  /** This share of the tokens (chosen at random each step) gets logit -Infinity, as banned tokens do. */
  readonly banned?: number;
}

/** A stream of logit vectors: each call gives the next step's (float32, finite values all distinct). */
export function logitsStream(spec: LogitsSpec): () => Float32Array {
  const random = mulberry32(spec.seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const n = spec.vocabularySize;
  const ranks = new Int32Array(n);
  return () => {
    const logits = new Float32Array(n);
    let draw: (i: number) => number;
    switch (spec.kind) {
      case "zipf": {
        for (let i = 0; i < n; i++) ranks[i] = i;
        for (let i = n - 1; i > 0; i--) {
          const j = Math.floor(random() * (i + 1));
          const t = ranks[i]!;
          ranks[i] = ranks[j]!;
          ranks[j] = t;
        }
        const exponent = spec.parameter ?? 1.1;
        draw = (i) => -exponent * Math.log(ranks[i]! + 1) + 0.3 * normal();
        break;
      }
      case "normal": {
        const scale = spec.parameter ?? 1;
        draw = () => scale * normal();
        break;
      }
      case "peaked":
        draw = () => normal();
        break;
      case "flat": {
        const scale = spec.parameter ?? 0.5;
        draw = () => scale * random();
        break;
      }
    }
    // Distinct values, so that no order among equal logits (unspecified in llama.cpp) decides a result.
    const seen = new Set<number>();
    for (let i = 0; i < n; i++) {
      let value = Math.fround(draw(i));
      while (seen.has(value)) value = Math.fround(draw(i));
      seen.add(value);
      logits[i] = value;
    }
    if (spec.kind === "peaked") {
      logits[Math.floor(random() * n)]! += 12;
      const second = Math.floor(random() * n);
      if (logits[second]! < 5) logits[second]! += 10;
    }
    if (spec.banned) for (let i = 0; i < n; i++) if (random() < spec.banned) logits[i] = -Infinity;
    return logits;
  };
}
