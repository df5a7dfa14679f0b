import type { Candidates } from "./candidates";

/**
 * llama.cpp's temperature: logits divided by `temperature` (float32). temperature <= 0 is greedy:
 * every logit except the first largest becomes -Infinity (the candidates stay, with probability 0).
 */
export function temperature(candidates: Candidates, temperature: number): void {
  const { logits, length } = candidates;
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < length; i++) {
      if (logits[i]! > logits[best]!) {
        logits[best] = -Infinity;
        best = i;
      } else {
        logits[i] = -Infinity;
      }
    }
    return;
  }
  const divisor = Math.fround(temperature);
  for (let i = 0; i < length; i++) logits[i] = logits[i]! / divisor;
}
