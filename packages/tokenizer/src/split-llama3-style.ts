import { UnicodeFlag, unicodeFlagsTable } from "./unicode-flags";

const LETTER = UnicodeFlag.LETTER;
const NUMBER = UnicodeFlag.NUMBER;
const WHITESPACE = UnicodeFlag.WHITESPACE;
const APOSTROPHE = 0x27;
const SPACE = 0x20;
const CR = 0x0d;
const LF = 0x0a;

/** ASCII lower case; llama.cpp's `unicode_tolower` maps no other code point onto s/t/m/d/r/e/v/l. */
function lowerAscii(codepoint: number): number {
  return codepoint >= 0x41 && codepoint <= 0x5a ? codepoint + 0x20 : codepoint;
}

/**
 * Splits code points into pre-token words as llama.cpp's hand-written matcher for the llama3/qwen2
 * regex does (unicode.cpp `unicode_regex_split_custom_llama3` / `_qwen2`):
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * with llama.cpp's Unicode classes. Pushes the end index of every word onto `ends`.
 */
export function splitLlama3Style(codepoints: Uint32Array, length: number, maxDigits: number, ends: number[]): void {
  const flagsOf = unicodeFlagsTable();
  // Flags of the code point at `position`, 0 past the end (llama.cpp's empty flags).
  const flagsAt = (position: number): number => (position < length ? (flagsOf[codepoints[position] ?? 0] ?? 0) : 0);

  let position = 0;
  while (position < length) {
    const codepoint = codepoints[position] ?? 0;
    const flags = flagsOf[codepoint] ?? 0;

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (codepoint === APOSTROPHE && position + 1 < length) {
      const next = lowerAscii(codepoints[position + 1] ?? 0);
      if (next === 0x73 /* s */ || next === 0x74 /* t */ || next === 0x6d /* m */ || next === 0x64 /* d */) {
        position += 2;
        ends.push(position);
        continue;
      }
      if (position + 2 < length) {
        const nextNext = lowerAscii(codepoints[position + 2] ?? 0);
        if (
          (next === 0x72 /* r */ && nextNext === 0x65) /* e */ ||
          (next === 0x76 /* v */ && nextNext === 0x65) /* e */ ||
          (next === 0x6c /* l */ && nextNext === 0x6c) /* l */
        ) {
          position += 3;
          ends.push(position);
          continue;
        }
      }
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(codepoint === CR || codepoint === LF || flags & NUMBER)) {
      if (flags & LETTER || flagsAt(position + 1) & LETTER) {
        position++;
        while (flagsAt(position) & LETTER) position++;
        ends.push(position);
        continue;
      }
    }

    // \p{N}{1,maxDigits}
    if (flags & NUMBER) {
      let runStart = position;
      while (flagsAt(position) & NUMBER) {
        position++;
        if (position - runStart >= maxDigits) {
          ends.push(position);
          runStart = position;
        }
      }
      if (position > runStart) ends.push(position);
      continue;
    }

    // <space>?[^\s\p{L}\p{N}]+[\r\n]*
    let flags2 = codepoint === SPACE ? flagsAt(position + 1) : flags;
    if (!(flags2 & (WHITESPACE | LETTER | NUMBER))) {
      if (codepoint === SPACE) position++;
      while (!(flags2 & (WHITESPACE | LETTER | NUMBER)) && flags2 !== 0) flags2 = flagsAt(++position);
      while (position < length && (codepoints[position] === CR || codepoints[position] === LF)) position++;
      ends.push(position);
      continue;
    }

    let whitespaceCount = 0;
    let lastLineBreakEnd = 0;
    while (flagsAt(position + whitespaceCount) & WHITESPACE) {
      const whitespace = codepoints[position + whitespaceCount];
      if (whitespace === CR || whitespace === LF) lastLineBreakEnd = position + whitespaceCount + 1;
      whitespaceCount++;
    }

    // \s*[\r\n]+
    if (lastLineBreakEnd > 0) {
      position = lastLineBreakEnd;
      ends.push(position);
      continue;
    }

    // \s+(?!\S)
    if (whitespaceCount > 1 && position + whitespaceCount < length) {
      position += whitespaceCount - 1;
      ends.push(position);
      continue;
    }

    // \s+
    if (whitespaceCount > 0) {
      position += whitespaceCount;
      ends.push(position);
      continue;
    }

    // no match
    position++;
    ends.push(position);
  }
}
