import { UnicodeFlag, unicodeFlagsTable } from "./unicode-flags";

const LETTER = UnicodeFlag.LETTER;
const NUMBER = UnicodeFlag.NUMBER;
const WHITESPACE = UnicodeFlag.WHITESPACE;
const APOSTROPHE = 0x27;
const SPACE = 0x20;

/**
 * Splits code points into pre-token words as llama.cpp's hand-written matcher for GPT-2's regex does
 * (unicode.cpp `unicode_regex_split_custom_gpt2`):
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * with llama.cpp's Unicode classes. Pushes the end index of every word onto `ends`.
 */
export function splitGpt2(codepoints: Uint32Array, length: number, ends: number[]): void {
  const flagsOf = unicodeFlagsTable();
  const flagsAt = (position: number): number => (position < length ? (flagsOf[codepoints[position] ?? 0] ?? 0) : 0);

  let position = 0;
  while (position < length) {
    const codepoint = codepoints[position] ?? 0;
    const flags = flagsOf[codepoint] ?? 0;

    // 's|'t|'re|'ve|'m|'ll|'d
    if (codepoint === APOSTROPHE && position + 1 < length) {
      const next = codepoints[position + 1];
      if (next === 0x73 /* s */ || next === 0x74 /* t */ || next === 0x6d /* m */ || next === 0x64 /* d */) {
        position += 2;
        ends.push(position);
        continue;
      }
      if (position + 2 < length) {
        const nextNext = codepoints[position + 2];
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

    let flags2 = codepoint === SPACE ? flagsAt(position + 1) : flags;
    // <space>?\p{L}+
    if (flags2 & LETTER) {
      if (codepoint === SPACE) position++;
      while (flags2 & LETTER) flags2 = flagsAt(++position);
      ends.push(position);
      continue;
    }
    // <space>?\p{N}+
    if (flags2 & NUMBER) {
      if (codepoint === SPACE) position++;
      while (flags2 & NUMBER) flags2 = flagsAt(++position);
      ends.push(position);
      continue;
    }

    // <space>?[^\s\p{L}\p{N}]+
    if (!(flags2 & (WHITESPACE | LETTER | NUMBER)) && flags2 !== 0) {
      if (codepoint === SPACE) position++;
      while (!(flags2 & (WHITESPACE | LETTER | NUMBER)) && flags2 !== 0) flags2 = flagsAt(++position);
      ends.push(position);
      continue;
    }

    let whitespaceCount = 0;
    while (flagsAt(position + whitespaceCount) & WHITESPACE) whitespaceCount++;

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
