const MASK_64 = (1n << 64n) - 1n;

/** One step of SplitMix64 (Steele, Lea, Flood 2014; Vigna's `splitmix64.c`) on a 64-bit BigInt state. */
function splitMix64(state: bigint): { state: bigint; output: bigint } {
  const next = (state + 0x9e3779b97f4a7c15n) & MASK_64;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK_64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK_64;
  return { state: next, output: z ^ (z >> 31n) };
}

/**
 * A seeded pseudo-random generator that gives the same numbers for the same seed on every machine
 * and JavaScript engine: only 32-bit integer arithmetic touches the state.
 *
 * Algorithm: xoshiro128** 1.1 (Blackman & Vigna 2018, `xoshiro128starstar.c`), 128 bits of state.
 * Seeding: SplitMix64 started at `stream * 2^32 + seed` gives two 64-bit outputs a, b; the state is
 * (s0, s1, s2, s3) = (low32(a), high32(a), low32(b), high32(b)). Different streams of one seed are
 * independent sequences (the sampler draws XTC's coin on stream 1, the token on stream 0).
 * - `nextUint32()`: the generator's output, an integer in [0, 2^32).
 * - `nextDouble()`: two outputs a, b → ((a >>> 5) · 2^26 + (b >>> 6)) / 2^53, uniform in [0, 1)
 *   with 53 random bits (the construction of `genrand_res53`).
 * - `nextFloat32()`: one output → (x >>> 8) / 2^24, uniform in [0, 1), exact as a float32.
 */
export class SeededRandom {
  /** The seed, an integer in [0, 2^32). */
  readonly seed: number;
  /** The stream, an integer in [0, 2^32). */
  readonly stream: number;
  // The xoshiro128** state, each a 32-bit integer (kept as int32).
  private s0 = 0;
  private s1 = 0;
  private s2 = 0;
  private s3 = 0;

  constructor(seed: number, stream = 0) {
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new RangeError(`seed must be an integer in [0, 4294967295], got ${seed}`);
    if (!Number.isInteger(stream) || stream < 0 || stream > 0xffffffff) throw new RangeError(`stream must be an integer in [0, 4294967295], got ${stream}`);
    this.seed = seed;
    this.stream = stream;
    this.reset();
  }

  /** Back to the state right after construction: the same numbers again. */
  reset(): void {
    const first = splitMix64((BigInt(this.stream) << 32n) | BigInt(this.seed));
    const second = splitMix64(first.state);
    this.s0 = Number(first.output & 0xffffffffn) | 0;
    this.s1 = Number(first.output >> 32n) | 0;
    this.s2 = Number(second.output & 0xffffffffn) | 0;
    this.s3 = Number(second.output >> 32n) | 0;
  }

  /** The four 32-bit state words (unsigned), for tests and for saving a position. */
  get state(): [number, number, number, number] {
    return [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
  }

  nextUint32(): number {
    const s0 = this.s0;
    const s1 = this.s1;
    const times5 = Math.imul(s1, 5);
    const result = Math.imul((times5 << 7) | (times5 >>> 25), 9) >>> 0;
    const t = s1 << 9;
    let s2 = this.s2 ^ s0;
    let s3 = this.s3 ^ s1;
    this.s1 = s1 ^ s2;
    this.s0 = s0 ^ s3;
    s2 ^= t;
    this.s2 = s2;
    this.s3 = (s3 << 11) | (s3 >>> 21);
    return result;
  }

  /** Uniform in [0, 1) with 53 random bits; consumes two outputs. */
  nextDouble(): number {
    const high = this.nextUint32() >>> 5;
    const low = this.nextUint32() >>> 6;
    return (high * 67108864 + low) / 9007199254740992;
  }

  /** Uniform in [0, 1) with 24 random bits (a float32 value); consumes one output. */
  nextFloat32(): number {
    return (this.nextUint32() >>> 8) / 16777216;
  }
}

/** A seed from the system's cryptographic random source, for when the caller gives none. */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0]!;
}
