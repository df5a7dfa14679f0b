/**
 * Which tasks llama-perplexity scores when it is asked for fewer than a data file holds, drawn as
 * its tools/perplexity/perplexity.cpp draws them: from a std::mt19937 seeded with 1 (the 32-bit
 * Mersenne Twister), through libstdc++'s std::uniform_int_distribution for HellaSwag, and through
 * a float scaling of the raw draws for WinoGrande and the multiple-choice format.
 */

const STATE_WORDS = 624;
const SHIFT_WORDS = 397;

/** std::mt19937: the 32-bit Mersenne Twister of the C++ standard library. */
export class MersenneTwister {
  private readonly state = new Uint32Array(STATE_WORDS);
  private index = STATE_WORDS;

  constructor(seed: number) {
    this.state[0] = seed >>> 0;
    for (let i = 1; i < STATE_WORDS; i++) {
      const previous = this.state[i - 1]!;
      this.state[i] = (Math.imul(1812433253, previous ^ (previous >>> 30)) + i) >>> 0;
    }
  }

  /** The next 32-bit draw, as an unsigned integer. */
  next(): number {
    if (this.index >= STATE_WORDS) this.twist();
    let y = this.state[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  private twist(): void {
    const s = this.state;
    for (let i = 0; i < STATE_WORDS; i++) {
      const y = (s[i]! & 0x80000000) | (s[(i + 1) % STATE_WORDS]! & 0x7fffffff);
      s[i] = s[(i + SHIFT_WORDS) % STATE_WORDS]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    this.index = 0;
  }
}

/**
 * std::uniform_int_distribution<size_t>(0, count − 1)(rng) as libstdc++ computes it for a 32-bit
 * generator: Lemire's multiply-and-reject on the 64-bit product of a draw and `count`.
 */
export function uniformBelow(rng: MersenneTwister, count: number): number {
  if (!Number.isInteger(count) || count < 1 || count > 0xffffffff) throw new RangeError(`uniformBelow needs a count from 1 to 2^32 − 1, got ${count}`);
  const range = BigInt(count);
  let product = BigInt(rng.next()) * range;
  let low = Number(product & 0xffffffffn);
  if (low < count) {
    const threshold = (0x100000000 - count) % count;
    while (low < threshold) {
      product = BigInt(rng.next()) * range;
      low = Number(product & 0xffffffffn);
    }
  }
  return Number(product >> 32n);
}

/**
 * The order in which llama-perplexity --hellaswag scores `count` of `available` tasks (indices into
 * the file): each a uniform draw among the tasks not yet taken, in their file order. It always
 * draws, so that even all tasks come shuffled.
 */
export function hellaswagTaskOrder(available: number, count: number): number[] {
  const remaining = Array.from({ length: available }, (_, i) => i);
  const rng = new MersenneTwister(1);
  const order: number[] = [];
  for (let i = 0; i < Math.min(count, available); i++) {
    const at = uniformBelow(rng, remaining.length);
    order.push(remaining[at]!);
    remaining.splice(at, 1);
  }
  return order;
}

/**
 * The `count` of `available` tasks (indices into the file, in the order scored) that
 * llama-perplexity --winogrande-tasks / --multiple-choice-tasks pick: a draw j =
 * int(float(2^-32) · float(draw) · float(left)) in single precision, then the task at j of those
 * left is taken and the last one left moves into its place. All of them in file order when
 * `count` is 0 or not below `available`.
 */
export function sampledTaskOrder(available: number, count: number): number[] {
  if (count === 0 || count >= available) return Array.from({ length: available }, (_, i) => i);
  const left = Array.from({ length: available }, (_, i) => i);
  const rng = new MersenneTwister(1);
  const scale = 2 ** -32; // 1/(1.f + (float)rng.max()): float(2^32 − 1) rounds to 2^32
  const order: number[] = [];
  for (let i = 0; i < count; i++) {
    const scaled = Math.fround(Math.fround(rng.next()) * scale);
    // a draw that rounds up to 2^32 gives j = left.length there, past the end; the last one here
    const j = Math.min(Math.trunc(Math.fround(scaled * Math.fround(left.length))), left.length - 1);
    order.push(left[j]!);
    left[j] = left[left.length - 1]!;
    left.pop();
  }
  return order;
}
