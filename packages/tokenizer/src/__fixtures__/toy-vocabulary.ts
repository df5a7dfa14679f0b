import { BYTE_TO_CODEPOINT } from "../byte-level-encoding";
import { TokenType } from "../token-attributes";
import type { TokenizerVocabulary } from "../tokenizer-vocabulary";

/** The byte-level character of one byte ("Ġ" for 0x20). */
export const byteChar = (byte: number): string => String.fromCharCode(BYTE_TO_CODEPOINT[byte] ?? 0);

/**
 * A small byte-level vocabulary: the 256 byte characters (ids 0-255, in byte order), then the
 * merged tokens, then special tokens. Merges use the byte-level spelling ("Ġ" for a space).
 */
export function toyVocabulary(
  options: {
    merges?: string[];
    extraTokens?: string[];
    specials?: Array<{ text: string; type: number }>;
    preTokenizer?: string;
  } & Partial<TokenizerVocabulary> = {},
): TokenizerVocabulary {
  const merges = options.merges ?? [];
  const tokens: string[] = [];
  const tokenTypes: number[] = [];
  for (let byte = 0; byte < 256; byte++) {
    tokens.push(byteChar(byte));
    tokenTypes.push(TokenType.NORMAL);
  }
  for (const merge of merges) {
    const text = merge.replace(" ", "");
    if (!tokens.includes(text)) {
      tokens.push(text);
      tokenTypes.push(TokenType.NORMAL);
    }
  }
  for (const text of options.extraTokens ?? []) {
    tokens.push(text);
    tokenTypes.push(TokenType.NORMAL);
  }
  for (const special of options.specials ?? []) {
    tokens.push(special.text);
    tokenTypes.push(special.type);
  }
  const { merges: _merges, extraTokens: _extra, specials: _specials, ...rest } = options;
  return { tokens, tokenTypes, merges, preTokenizer: "qwen2", addBos: false, ...rest };
}
