import { describe, expect, it } from "vitest";
import { UnicodeFlag, unicodeFlags, unicodeFlagsTable } from "./unicode-flags";

const has = (codepoint: number, flag: number): boolean => (unicodeFlags(codepoint) & flag) !== 0;

describe("unicodeFlags (llama.cpp's Unicode classes)", () => {
  it("classifies ASCII", () => {
    expect(unicodeFlags(0x61)).toBe(UnicodeFlag.LETTER);
    expect(unicodeFlags(0x5a)).toBe(UnicodeFlag.LETTER);
    expect(unicodeFlags(0x30)).toBe(UnicodeFlag.NUMBER);
    expect(unicodeFlags(0x21)).toBe(UnicodeFlag.PUNCTUATION);
    expect(unicodeFlags(0x24)).toBe(UnicodeFlag.SYMBOL);
    expect(unicodeFlags(0x20)).toBe(UnicodeFlag.SEPARATOR | UnicodeFlag.WHITESPACE);
    expect(unicodeFlags(0x09)).toBe(UnicodeFlag.CONTROL | UnicodeFlag.WHITESPACE);
  });

  it("classifies letters and numbers beyond ASCII", () => {
    for (const letter of ["é", "中", "ß", "ض", "क", "ᄀ", "𝐀"]) expect(has(letter.codePointAt(0) ?? 0, UnicodeFlag.LETTER)).toBe(true);
    // Nd, No and Nl are all \p{N}
    for (const number of ["٣", "²", "½", "Ⅻ", "〇", "①"]) expect(has(number.codePointAt(0) ?? 0, UnicodeFlag.NUMBER)).toBe(true);
    expect(has(0x0301, UnicodeFlag.ACCENT_MARK)).toBe(true);
    expect(has(0x1f642, UnicodeFlag.SYMBOL)).toBe(true);
  });

  it("uses llama.cpp's 25 whitespace code points, not Python's or JavaScript's", () => {
    for (const space of [0x0b, 0x0c, 0x85, 0xa0, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]) {
      expect(has(space, UnicodeFlag.WHITESPACE)).toBe(true);
    }
    // Python's \s has the file/group/record/unit separators; JavaScript's has U+FEFF; llama.cpp neither.
    for (const notSpace of [0x1c, 0x1d, 0x1e, 0x1f, 0xfeff, 0x200b, 0x180e]) expect(has(notSpace, UnicodeFlag.WHITESPACE)).toBe(false);
    const whitespace = Array.from(unicodeFlagsTable()).filter((flags) => flags & UnicodeFlag.WHITESPACE).length;
    expect(whitespace).toBe(25);
  });

  it("gives every code point some class, and UNDEFINED beyond U+10FFFF", () => {
    expect(unicodeFlagsTable().every((flags) => flags !== 0)).toBe(true);
    expect(unicodeFlags(0x110000)).toBe(UnicodeFlag.UNDEFINED);
    expect(unicodeFlags(-1)).toBe(UnicodeFlag.UNDEFINED);
    expect(unicodeFlags(0x10ffff)).toBe(UnicodeFlag.UNDEFINED);
  });
});
