import { alternatives, digitClass, join } from "./gbnf-text";

function anyDigits(count: number): string {
  return count === 0 ? "" : count === 1 ? "[0-9]" : `[0-9]{${count}}`;
}

/** Digit strings of `digits.length` digits (leading zeros allowed) not below `digits`. */
function atLeast(digits: string): string {
  if (/^0*$/.test(digits)) return anyDigits(digits.length);
  const first = Number(digits[0]);
  const rest = digits.slice(1);
  const options = [join(`"${first}"`, atLeast(rest))];
  if (first < 9) options.push(join(digitClass(first + 1, 9), anyDigits(rest.length)));
  return alternatives(options);
}

/** Digit strings of `digits.length` digits (leading zeros allowed) not above `digits`. */
function atMost(digits: string): string {
  if (/^9*$/.test(digits)) return anyDigits(digits.length);
  const first = Number(digits[0]);
  const rest = digits.slice(1);
  const options = [join(`"${first}"`, atMost(rest))];
  if (first > 0) options.push(join(digitClass(0, first - 1), anyDigits(rest.length)));
  return alternatives(options);
}

/** Digit strings between `low` and `high`, which have the same length (low <= high). */
export function integerDigitsGbnf(low: string, high: string): string {
  if (low === high) return `"${low}"`;
  let common = 0;
  while (low[common] === high[common]) common++;
  const prefix = common > 0 ? `"${low.slice(0, common)}"` : "";
  const a = Number(low[common]);
  const b = Number(high[common]);
  const lowRest = low.slice(common + 1);
  const highRest = high.slice(common + 1);
  const width = lowRest.length;
  const options: string[] = [];
  // The first differing digit: `a` followed by at least lowRest, `b` followed by at most highRest,
  // anything strictly between followed by any digits (a and b join that when their rest is free).
  const lowFree = /^0*$/.test(lowRest);
  const highFree = /^9*$/.test(highRest);
  const middleLow = lowFree ? a : a + 1;
  const middleHigh = highFree ? b : b - 1;
  if (!lowFree) options.push(join(`"${a}"`, atLeast(lowRest)));
  if (middleLow <= middleHigh) options.push(join(digitClass(middleLow, middleHigh), anyDigits(width)));
  if (!highFree) options.push(join(`"${b}"`, atMost(highRest)));
  return join(prefix, alternatives(options));
}

/** Decimal numbers in [low, high] (0 <= low <= high) without leading zeros. */
function nonNegativeRange(low: number, high: number): string {
  const lowDigits = String(low).length;
  const highDigits = String(high).length;
  const options: string[] = [];
  for (let length = lowDigits; length <= highDigits; length++) {
    const from = length === lowDigits ? low : 10 ** (length - 1);
    const to = length === highDigits ? high : 10 ** length - 1;
    options.push(integerDigitsGbnf(String(from), String(to)));
  }
  return alternatives(options);
}

/**
 * A GBNF expression for the integers in [low, high] as JSON writes them (no leading zeros, no
 * "-0", no fraction or exponent). The bounds must be safe integers with low <= high.
 */
export function integerRangeGbnf(low: number, high: number): string {
  if (!Number.isSafeInteger(low) || !Number.isSafeInteger(high) || low > high) throw new RangeError(`integer range [${low}, ${high}] must have safe integer bounds in order`);
  const options: string[] = [];
  // -m for m in [max(1, -high), -low]
  if (low < 0) options.push(join('"-"', nonNegativeRange(Math.max(1, -high), -low)));
  if (high >= 0) options.push(nonNegativeRange(Math.max(0, low), high));
  return alternatives(options);
}
