import { type Candidates, softmax } from "./candidates";
import type { SeededRandom } from "./seeded-random";

/**
 * llama.cpp's XTC ("exclude top choices"): with chance `probability` (one float draw from `random`
 * per call, made whenever XTC is enabled and there are at least 2 candidates), removes every
 * candidate whose probability is at least `threshold` except the least likely of them, provided at
 * least `minKeep` remain. probability <= 0 or threshold > 0.5 disables it. Leaves the candidates sorted.
 */
export function xtc(candidates: Candidates, probability: number, threshold: number, random: SeededRandom, minKeep = 1): void {
  if (probability <= 0 || threshold > 0.5 || candidates.length < 2) return;
  const chance = random.nextFloat32();
  if (chance > Math.fround(probability)) return;
  softmax(candidates, true);
  const { ids, logits, probabilities, length } = candidates;
  const limit = Math.fround(threshold);
  let last = 0; // position of the last candidate at or above the threshold
  for (let i = 0; i < length; i++) {
    if (probabilities[i]! >= limit) last = i;
    else break;
  }
  if (length - last >= minKeep && last > 0) {
    ids.copyWithin(0, last, length);
    logits.copyWithin(0, last, length);
    probabilities.copyWithin(0, last, length);
    candidates.length = length - last;
  }
}
