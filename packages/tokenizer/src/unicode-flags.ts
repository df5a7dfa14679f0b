import { UNICODE_CATEGORY_RANGES, UNICODE_WHITESPACE } from "./unicode-flags-data";

/**
 * Code point classes as llama.cpp's `unicode_cpt_flags` defines them (unicode.h). The category bits
 * come from llama.cpp's own Unicode tables, not from the JavaScript engine's `\p{…}`, so that the
 * pre-tokenizers split text exactly where llama.cpp does.
 */
export const UnicodeFlag = {
  UNDEFINED: 0x0001,
  /** `\p{N}` */
  NUMBER: 0x0002,
  /** `\p{L}` */
  LETTER: 0x0004,
  /** `\p{Z}` */
  SEPARATOR: 0x0008,
  /** `\p{M}` */
  ACCENT_MARK: 0x0010,
  /** `\p{P}` */
  PUNCTUATION: 0x0020,
  /** `\p{S}` */
  SYMBOL: 0x0040,
  /** `\p{C}` */
  CONTROL: 0x0080,
  /** `\s` as llama.cpp defines it (a fixed set of 25 code points). */
  WHITESPACE: 0x0100,
} as const;

export const MAX_CODEPOINT = 0x10ffff;

let table: Uint16Array | undefined;

/** Flags of every code point, built once from the compact range table (2.2 MB). */
export function unicodeFlagsTable(): Uint16Array {
  if (table) return table;
  const flags = new Uint16Array(MAX_CODEPOINT + 1);
  let start = 0;
  let previousFlags = -1;
  for (const item of UNICODE_CATEGORY_RANGES.split(",")) {
    const colon = item.indexOf(":");
    const rangeStart = start + Number.parseInt(item.slice(0, colon), 36);
    if (previousFlags >= 0) flags.fill(previousFlags, start, rangeStart);
    start = rangeStart;
    previousFlags = Number.parseInt(item.slice(colon + 1), 36);
  }
  flags.fill(previousFlags, start, MAX_CODEPOINT + 1);
  for (const codepoint of UNICODE_WHITESPACE) flags[codepoint] = (flags[codepoint] ?? 0) | UnicodeFlag.WHITESPACE;
  table = flags;
  return flags;
}

/** llama.cpp's flags for one code point; UNDEFINED beyond U+10FFFF. */
export function unicodeFlags(codepoint: number): number {
  if (codepoint < 0 || codepoint > MAX_CODEPOINT) return UnicodeFlag.UNDEFINED;
  return unicodeFlagsTable()[codepoint] ?? UnicodeFlag.UNDEFINED;
}
