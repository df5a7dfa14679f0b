/** A token matched as a whole before BPE: CONTROL, USER_DEFINED or UNKNOWN (llama.cpp `cache_special_tokens`). */
export interface SpecialTokenPattern {
  readonly id: number;
  readonly text: string;
  /** CONTROL or UNKNOWN: matched only when special tokens are parsed. USER_DEFINED tokens always are. */
  readonly onlyWhenParsingSpecial: boolean;
  /** Whitespace before the token is dropped. */
  readonly lstrip: boolean;
  /** Whitespace after the token is dropped. */
  readonly rstrip: boolean;
}

/** A piece of the input: a token matched whole, or a range of text still to pre-tokenize. */
export type TextFragment = { readonly token: number } | { readonly start: number; readonly end: number };

/** C `isspace` in the "C" locale, which llama.cpp uses for lstrip/rstrip. */
function isCSpace(code: number): boolean {
  return code === 0x20 || (code >= 0x09 && code <= 0x0d);
}

/**
 * Splits `text` at special tokens as llama.cpp's `tokenizer_st_partition` does: the patterns are
 * tried one after another (longest text first), each one splitting every text fragment left by the
 * previous ones at all its non-overlapping occurrences, left to right.
 *
 * `patterns` must already be in llama.cpp's order: longest UTF-8 text first. (llama.cpp sorts with
 * an unstable std::sort, so the order among equally long tokens may differ; it only matters when
 * two equally long special tokens overlap in the text, which no Qwen special tokens can.)
 */
export function partitionSpecialTokens(text: string, patterns: readonly SpecialTokenPattern[], parseSpecial: boolean): TextFragment[] {
  if (text.length === 0) return [];
  let fragments: TextFragment[] = [{ start: 0, end: text.length }];
  for (const pattern of patterns) {
    if (pattern.onlyWhenParsingSpecial && !parseSpecial) continue;
    const needle = pattern.text;
    // Quick reject: nothing to split when the pattern occurs nowhere.
    if (text.indexOf(needle) < 0) continue;
    const split: TextFragment[] = [];
    for (const fragment of fragments) {
      if ("token" in fragment) {
        split.push(fragment);
        continue;
      }
      let start = fragment.start;
      const end = fragment.end;
      for (;;) {
        const match = text.indexOf(needle, start);
        if (match < 0 || match + needle.length > end) {
          if (end > start) split.push({ start, end });
          break;
        }
        let leftEnd = match;
        if (pattern.lstrip) while (leftEnd > start && isCSpace(text.charCodeAt(leftEnd - 1))) leftEnd--;
        if (leftEnd > start) split.push({ start, end: leftEnd });
        split.push({ token: pattern.id });
        start = match + needle.length;
        if (pattern.rstrip) while (start < end && isCSpace(text.charCodeAt(start))) start++;
        if (start >= end) break;
      }
    }
    fragments = split;
  }
  return fragments;
}
