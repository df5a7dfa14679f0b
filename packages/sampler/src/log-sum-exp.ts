const STEPS_PER_OCTAVE = 64;
/** 2^(-j/64) for j in [0, 3072): exp down to 2^-48. */
const POWERS = Float64Array.from({ length: STEPS_PER_OCTAVE * 48 }, (_, j) => 2 ** (-j / STEPS_PER_OCTAVE));
const SCALE = STEPS_PER_OCTAVE * Math.LOG2E; // (max - x) in 1/64 octaves
const STEP = Math.LN2 / STEPS_PER_OCTAVE;
/** Terms below e^-31.9 ≈ 1.4e-14 of the largest are skipped: 1.5e5 of them change the sum by < 2.2e-9 relative. */
const CUTOFF = STEPS_PER_OCTAVE * 46;

/** Position of the first largest of values[0..length). */
export function argmax(values: Float32Array, length: number): number {
  let best = 0;
  let max = values[0]!;
  for (let i = 1; i < length; i++) {
    const value = values[i]!;
    if (value > max) {
      max = value;
      best = i;
    }
  }
  return best;
}

/**
 * log Σ exp(values[i]) over values[0..length) in float64, given their maximum `max` (finite).
 * exp(x − max) is a table entry 2^(-j/64) times a cubic for e^r, |r| <= ln(2)/128 (relative error
 * < 4e-11 per term), three times faster than Math.exp; terms below e^-31.9 of the largest are
 * skipped. On a 151,936-entry vocabulary the result is within 3e-9 of the exact value.
 */
export function logSumExp(values: Float32Array, length: number, max: number): number {
  let sum = 0;
  for (let i = 0; i < length; i++) {
    const distance = (max - values[i]!) * SCALE; // -Infinity values give Infinity: skipped
    if (distance < CUTOFF) {
      const j = (distance + 0.5) | 0;
      const r = (j - distance) * STEP;
      sum += POWERS[j]! * (1 + r * (1 + r * (0.5 + r * 0.16666666666666666)));
    }
  }
  return max + Math.log(sum);
}
