/**
 * GPT-2's byte-level encoding: every byte maps to one printable code point, so that byte strings
 * become strings of vocabulary characters (" " → "Ġ", "\n" → "Ċ"). Printable Latin-1 bytes map to
 * themselves; the others map to U+0100 onwards in byte order (llama.cpp unicode.cpp
 * `unicode_byte_to_utf8_map`).
 */
export const BYTE_TO_CODEPOINT: Uint16Array = (() => {
  const map = new Uint16Array(256);
  const isPrintable = (byte: number): boolean =>
    (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
  let next = 256;
  for (let byte = 0; byte < 256; byte++) map[byte] = isPrintable(byte) ? byte : next++;
  return map;
})();

/** The inverse: code point (below 0x144) → byte, or -1 for code points that encode no byte. */
export const CODEPOINT_TO_BYTE: Int16Array = (() => {
  const map = new Int16Array(0x144).fill(-1);
  for (let byte = 0; byte < 256; byte++) map[BYTE_TO_CODEPOINT[byte] ?? 0] = byte;
  return map;
})();

/** The byte-level string of some bytes ("Ġthe" for " the"). */
export function byteLevelEncode(bytes: ArrayLike<number>): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += String.fromCharCode(BYTE_TO_CODEPOINT[bytes[i] ?? 0] ?? 0);
  return out;
}
