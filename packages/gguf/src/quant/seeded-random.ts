/**
 * Deterministic pseudo-random float data for tests and benchmarks. Only integer arithmetic and
 * correctly rounded IEEE operations are used (no Math.log or Math.cos, whose last bits may differ
 * between engines and platforms), so the same seed gives the same floats everywhere; tests compare
 * hashes of quantized output against values produced by ggml from these inputs.
 */

/** A generator of uniform numbers k / 2^32 in [0, 1) from a 32-bit seed (mulberry32). */
export function seededUniform(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SQRT_3 = 1.7320508075688772;

/**
 * `count` float32 values with mean 0 and deviation 1, bell-shaped (the sum of four uniforms,
 * centred and scaled: an Irwin-Hall approximation of the normal distribution, bounded by ±2√3).
 */
export function seededNormalValues(count: number, seed: number): Float32Array {
  const uniform = seededUniform(seed);
  const values = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    values[i] = (uniform() + uniform() + uniform() + uniform() - 2) * SQRT_3;
  }
  return values;
}
