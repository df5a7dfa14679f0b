import { alternatives, digitClass, join } from "./gbnf-text";
import { integerDigitsGbnf } from "./integer-range";

/**
 * Most digits of a bounded number, integer and fraction parts together. Decimals of at most 15
 * significant digits keep their order as doubles (each converts to a double that converts back to
 * it), so a value the grammar writes above or below a bound of at most 15 digits stays so once
 * JSON.parse reads it.
 */
export const MAX_NUMBER_DIGITS = 15;

/** A bound as a plain decimal: integer digits (no leading zeros, "0" for none) and fraction digits (no trailing zeros). */
interface Decimal {
  readonly integer: string;
  readonly fraction: string;
}

/** The exact decimal digits of a finite, non-negative double's shortest representation. */
export function plainDecimal(value: number): Decimal {
  const [mantissa, exponentText] = String(value).split("e");
  const exponent = exponentText === undefined ? 0 : Number(exponentText);
  const [whole, part = ""] = mantissa!.split(".");
  let digits = whole! + part;
  let point = whole!.length + exponent; // digits before the decimal point
  if (point < 0) {
    digits = "0".repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += "0".repeat(point - digits.length);
  const integer = digits.slice(0, point).replace(/^0+/, "") || "0";
  const fraction = digits.slice(point).replace(/0+$/, "");
  return { integer, fraction };
}

/** Significant digits of a plain decimal. */
export function significantDigits(decimal: Decimal): number {
  return (decimal.integer === "0" ? "" : decimal.integer + decimal.fraction).replace(/0+$/, "").length || decimal.fraction.replace(/^0+/, "").length;
}

function anyDigits(max: number): string {
  return max === 0 ? "" : `[0-9]{0,${max}}`;
}

/** A fraction bound: digits (value 0.d…) and whether the bound itself is excluded; undefined for none. */
interface FractionBound {
  readonly digits: string;
  readonly strict: boolean;
}

/**
 * Digit strings F of 0 to `max` digits whose value 0.F lies within the bounds, as a GBNF
 * expression ("" when only the empty string does), or undefined when none does. The empty string
 * counts as 0 and is included only when `allowEmpty`.
 */
function fractionDigits(low: FractionBound | undefined, high: FractionBound | undefined, max: number, allowEmpty: boolean): string | undefined {
  const lowZero = low === undefined || /^0*$/.test(low.digits);
  const highZero = high !== undefined && /^0*$/.test(high.digits);
  // Does the value 0 (the empty string, or zeros from here on) satisfy the bounds?
  const zeroFits = (low === undefined || (lowZero && !low.strict)) && (high === undefined || !highZero || !high.strict);
  const options: string[] = [];
  if (allowEmpty && zeroFits) options.push('""');
  if (max > 0) {
    if (lowZero && !low?.strict && high === undefined) {
      // No constraint left: any digits.
      options.push(`[0-9]{1,${max}}`);
    } else if (lowZero && !low?.strict && highZero && !high.strict) {
      // Exactly the bound: zeros only.
      options.push(max === 1 ? '"0"' : `"0"{1,${max}}`);
    } else {
      const l0 = low === undefined ? 0 : Number(low.digits[0] ?? "0");
      const h0 = high === undefined ? 10 : Number(high.digits[0] ?? "0");
      const lowRest = low && { digits: low.digits.slice(1), strict: low.strict };
      const highRest = high && { digits: high.digits.slice(1), strict: high.strict };
      if (l0 === h0) {
        const rest = fractionDigits(lowRest, highRest, max - 1, true);
        if (rest !== undefined) options.push(join(`"${l0}"`, rest));
      } else {
        const lowFirst = fractionDigits(lowRest, undefined, max - 1, true);
        if (lowFirst !== undefined) options.push(join(`"${l0}"`, lowFirst));
        if (l0 + 1 <= h0 - 1) options.push(join(digitClass(l0 + 1, Math.min(9, h0 - 1)), anyDigits(max - 1)));
        if (h0 <= 9) {
          const highFirst = fractionDigits(undefined, highRest, max - 1, true);
          if (highFirst !== undefined) options.push(join(`"${h0}"`, highFirst));
        }
      }
    }
  }
  if (options.length === 0) return undefined;
  return options.length === 1 && options[0] === '""' ? "" : alternatives(options);
}

/** `"." F` for the fraction digits F, optional when the empty fraction fits; undefined when nothing fits. */
function fractionPart(low: FractionBound | undefined, high: FractionBound | undefined, max: number): string | undefined {
  const empty = fractionDigits(low, high, 0, true) !== undefined;
  const digits = max > 0 ? fractionDigits(low, high, max, false) : undefined;
  if (digits === undefined) return empty ? "" : undefined;
  return empty ? `( "." ${digits} )?` : `"." ${digits}`;
}

/** Integers between `low` and `high` (decimal strings, low <= high), split by length: [length, expression]. */
function integersByLength(low: string, high: string): [number, string][] {
  const out: [number, string][] = [];
  for (let length = low.length; length <= high.length; length++) {
    const from = length === low.length ? low : `1${"0".repeat(length - 1)}`;
    const to = length === high.length ? high : "9".repeat(length);
    if (from.length === to.length && from <= to) out.push([length, integerDigitsGbnf(from, to)]);
  }
  return out;
}

function increment(digits: string): string {
  return String(BigInt(digits) + 1n);
}

function decrement(digits: string): string {
  return String(BigInt(digits) - 1n);
}

/**
 * Non-negative decimals x with low <= x <= high (or < where strict), high undefined for none, in
 * JSON's notation without an exponent and with at most MAX_NUMBER_DIGITS digits; undefined when
 * no such decimal exists.
 */
function nonNegativeDecimals(low: Decimal, lowStrict: boolean, high: Decimal | undefined, highStrict: boolean): string | undefined {
  const maxInteger = "9".repeat(MAX_NUMBER_DIGITS);
  const options: string[] = [];
  const add = (integer: string, fraction: string | undefined) => {
    if (fraction !== undefined) options.push(join(integer, fraction));
  };
  const lowFraction = { digits: low.fraction, strict: lowStrict };
  if (high && high.integer === low.integer) {
    add(`"${low.integer}"`, fractionPart(lowFraction, { digits: high.fraction, strict: highStrict }, MAX_NUMBER_DIGITS - low.integer.length));
    return alternatives(options) || undefined;
  }
  if (low.integer.length <= MAX_NUMBER_DIGITS) add(`"${low.integer}"`, fractionPart(lowFraction, undefined, MAX_NUMBER_DIGITS - low.integer.length));
  const top = high ? high.integer : maxInteger;
  const first = increment(low.integer);
  const last = high ? decrement(high.integer) : maxInteger;
  if (first.length < last.length || (first.length === last.length && first <= last)) {
    for (const [length, integers] of integersByLength(first, last.length > MAX_NUMBER_DIGITS ? maxInteger : last)) {
      add(integers, length < MAX_NUMBER_DIGITS ? `( "." [0-9]{1,${MAX_NUMBER_DIGITS - length}} )?` : "");
    }
  }
  if (high && top.length <= MAX_NUMBER_DIGITS) add(`"${high.integer}"`, fractionPart(undefined, { digits: high.fraction, strict: highStrict }, MAX_NUMBER_DIGITS - high.integer.length));
  return alternatives(options) || undefined;
}

/**
 * A GBNF expression for the JSON numbers x with low <= x <= high (< where the bound is
 * exclusive); either bound may be infinite. Written without an exponent, with at most
 * MAX_NUMBER_DIGITS digits, and never as negative zero. Undefined when no such number exists.
 * Finite bounds must have at most MAX_NUMBER_DIGITS significant digits (see there).
 */
export function numberRangeGbnf(low: number, lowExclusive: boolean, high: number, highExclusive: boolean): string | undefined {
  const options: string[] = [];
  const finiteHigh = Number.isFinite(high);
  const finiteLow = Number.isFinite(low);
  if (low < 0) {
    // x = -y: y <= -low, y >= -high where high < 0 (else y > 0: no negative zero).
    const upper = finiteLow ? plainDecimal(-low) : undefined;
    const lower = high < 0 ? plainDecimal(-high) : { integer: "0", fraction: "" };
    const negative = nonNegativeDecimals(lower, high < 0 ? highExclusive : true, upper, lowExclusive);
    if (negative !== undefined) options.push(join('"-"', negative));
  }
  if (high >= 0) {
    const lower = low > 0 ? plainDecimal(low) : { integer: "0", fraction: "" };
    const positive = nonNegativeDecimals(lower, low >= 0 ? lowExclusive : false, finiteHigh ? plainDecimal(high) : undefined, highExclusive);
    if (positive !== undefined) options.push(positive);
  }
  return alternatives(options) || undefined;
}
