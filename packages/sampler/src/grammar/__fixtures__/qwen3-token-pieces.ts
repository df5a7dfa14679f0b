import { loadQwen3Vocabulary } from "@memra/synthetic";
import { TokenTrie } from "../token-trie";

// GGUF token types (gguf-py TokenType): only NORMAL (1) and USER_DEFINED (4) tokens have text to sample.
const NORMAL = 1;
const USER_DEFINED = 4;

/** GPT-2's byte-level alphabet inverted: the character standing for each byte back to the byte. */
function byteLevelDecoder(): Map<number, number> {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const decoder = new Map<number, number>();
  for (const b of printable) decoder.set(b, b);
  let extra = 0;
  for (let b = 0; b < 256; b++) if (!printable.includes(b)) decoder.set(256 + extra++, b);
  return decoder;
}

let cached: { pieces: (Uint8Array | undefined)[]; endOfGeneration: number[]; trie: TokenTrie } | undefined;

/**
 * The real Qwen3 vocabulary's token pieces (the bytes the tokenizer decodes each token to; none
 * for control and unused tokens) and its end-of-generation tokens, as @memra/core passes them.
 */
export function qwen3TokenPieces(): { pieces: (Uint8Array | undefined)[]; endOfGeneration: number[]; trie: TokenTrie } {
  if (cached) return cached;
  const vocabulary = loadQwen3Vocabulary();
  const decoder = byteLevelDecoder();
  const encoder = new TextEncoder();
  const pieces = vocabulary.tokens.map((text, id) => {
    const type = vocabulary.tokenTypes[id];
    if (type === USER_DEFINED) return encoder.encode(text);
    if (type !== NORMAL) return undefined;
    return Uint8Array.from(text, (character) => decoder.get(character.codePointAt(0)!) ?? 0);
  });
  const endOfGeneration = [vocabulary.eosTokenId, vocabulary.bosTokenId];
  cached = { pieces, endOfGeneration, trie: TokenTrie.fromPieces(pieces, endOfGeneration) };
  return cached;
}
