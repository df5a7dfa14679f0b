import { type Candidates, sortCandidates } from "./candidates";

const FLT_MAX = 3.4028234663852886e38;

/**
 * llama.cpp's min-p: keeps the candidates whose probability is at least `p` times the largest,
 * i.e. logit >= max logit + log(p) (float32), and at least `minKeep`. p <= 0 disables it. Keeps the
 * candidates' order; unsorted candidates are filtered without sorting when enough survive.
 */
export function minP(candidates: Candidates, p: number, minKeep = 1): void {
  if (p <= 0 || candidates.length === 0) return;
  const logOfP = Math.fround(Math.log(Math.fround(p)));
  const { ids, logits } = candidates;
  const length = candidates.length;

  if (!candidates.sorted) {
    let max = -FLT_MAX;
    for (let i = 0; i < length; i++) if (logits[i]! > max) max = logits[i]!;
    const minLogit = Math.fround(max + logOfP);
    let kept = 0;
    for (let i = 0; i < length; i++) if (logits[i]! >= minLogit) kept++;
    if (kept > 0 && kept >= minKeep) {
      let write = 0;
      for (let i = 0; i < length; i++) {
        if (logits[i]! < minLogit) continue;
        ids[write] = ids[i]!;
        logits[write] = logits[i]!;
        candidates.probabilities[write] = candidates.probabilities[i]!;
        write++;
      }
      candidates.length = write;
      return;
    }
    sortCandidates(candidates);
  }

  const minLogit = Math.fround(logits[0]! + logOfP);
  let keep = 1; // the first always stays
  for (; keep < length; keep++) if (logits[keep]! < minLogit && keep >= minKeep) break;
  candidates.length = keep;
}
