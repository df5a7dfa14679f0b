/**
 * A set of code points: sorted, merged, disjoint `[low, high]` pairs, inverted when `negated`.
 * `.` is the negated empty class; `[]` the empty class (it matches nothing).
 */
export interface CharacterClass {
  readonly ranges: readonly number[];
  readonly negated: boolean;
}

/** One symbol of a sequence: a code point from a class, or a reference to a rule (by index). */
export type GrammarSymbol = { readonly type: "characters"; readonly characters: CharacterClass } | { readonly type: "rule"; readonly rule: number };

/**
 * A context-free grammar over Unicode code points, as GBNF describes one: each rule is a list of
 * alternatives, each alternative a sequence of symbols (empty for the empty string). Repetitions
 * and groups have already become rules of their own.
 */
export interface Grammar {
  /** Names for diagnostics: user rules keep theirs, generated rules are named after the rule they came from. */
  readonly ruleNames: readonly string[];
  readonly rules: readonly (readonly (readonly GrammarSymbol[])[])[];
  /** Index of the start rule. */
  readonly root: number;
}

/** Sorts and merges `[low, high]` pairs so that membership and coverage tests can walk them once. */
export function normalizeRanges(pairs: readonly number[]): number[] {
  const ranges: Array<[number, number]> = [];
  for (let i = 0; i < pairs.length; i += 2) ranges.push([pairs[i]!, pairs[i + 1]!]);
  ranges.sort((a, b) => a[0] - b[0]);
  const merged: number[] = [];
  for (const [low, high] of ranges) {
    const last = merged.length - 1;
    if (merged.length > 0 && low <= merged[last]! + 1) merged[last] = Math.max(merged[last]!, high);
    else merged.push(low, high);
  }
  return merged;
}

/** Whether `codePoint` is in the class. */
export function classContains(characters: CharacterClass, codePoint: number): boolean {
  const ranges = characters.ranges;
  let inside = false;
  for (let i = 0; i < ranges.length; i += 2) {
    if (codePoint < ranges[i]!) break;
    if (codePoint <= ranges[i + 1]!) {
      inside = true;
      break;
    }
  }
  return inside !== characters.negated;
}

/** Whether some code point in `[low, high]` is in the class (for a UTF-8 character not yet complete). */
export function classIntersects(characters: CharacterClass, low: number, high: number): boolean {
  const ranges = characters.ranges;
  if (!characters.negated) {
    for (let i = 0; i < ranges.length; i += 2) if (ranges[i]! <= high && ranges[i + 1]! >= low) return true;
    return false;
  }
  // Ranges are merged, so [low, high] is excluded only when one range covers it whole.
  for (let i = 0; i < ranges.length; i += 2) if (ranges[i]! <= low && ranges[i + 1]! >= high) return false;
  return true;
}
