import { describe, expect, it } from "vitest";
import { findPreTokenizer, PRE_TOKENIZERS } from "./pre-tokenizers";
import { TokenizerError } from "./tokenizer-error";
import { mulberry32 } from "@memra/synthetic";

/** The words a pre-tokenizer splits `text` into. */
function split(name: string, text: string): string[] {
  const codepoints = Uint32Array.from(Array.from(text, (c) => c.codePointAt(0) ?? 0));
  const ends: number[] = [];
  findPreTokenizer(name).split(codepoints, codepoints.length, ends);
  const characters = Array.from(text);
  const words: string[] = [];
  let start = 0;
  for (const end of ends) {
    words.push(characters.slice(start, end).join(""));
    start = end;
  }
  return words;
}

// The regexes in a form JavaScript's engine runs with backtracking semantics like the Hugging Face
// tokenizers; on ASCII text their \p{L}, \p{N} and \s agree with llama.cpp's classes.
const ORACLES: Record<string, RegExp> = {
  qwen2: /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu,
  llama3: /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu,
  "gpt-2": /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu,
};


describe("pre-tokenizers", () => {
  it("has one entry per pre-tokenizer, and every tokenizer.ggml.pre name maps to one", () => {
    expect(PRE_TOKENIZERS.map((p) => p.name)).toEqual(["qwen2", "llama3", "gpt2"]);
    const names = PRE_TOKENIZERS.flatMap((p) => p.names);
    expect(new Set(names).size).toBe(names.length);
    expect(findPreTokenizer("deepseek-r1-qwen").name).toBe("qwen2");
    expect(findPreTokenizer("llama-bpe").name).toBe("llama3");
    expect(findPreTokenizer("gpt-2").name).toBe("gpt2");
    expect(() => findPreTokenizer("default")).toThrow(TokenizerError);
  });

  it("qwen2: contractions in any case, one digit per word, letters with one leading non-letter", () => {
    expect(split("qwen2", "Hello world's 123")).toEqual(["Hello", " world", "'s", " ", "1", "2", "3"]);
    expect(split("qwen2", "I'LL DON'T we'Re")).toEqual(["I", "'LL", " DON", "'T", " we", "'Re"]);
    expect(split("qwen2", "a  b\n\n c")).toEqual(["a", " ", " b", "\n\n", " c"]);
    expect(split("qwen2", "x?!\n\ny")).toEqual(["x", "?!\n\n", "y"]);
    expect(split("qwen2", "end   ")).toEqual(["end", "   "]);
    expect(split("qwen2", "\tword")).toEqual(["\tword"]);
  });

  it("qwen2 uses llama.cpp's classes beyond ASCII", () => {
    expect(split("qwen2", "你好，世界。")).toEqual(["你好", "，世界", "。"]);
    expect(split("qwen2", "a\u3000b")).toEqual(["a", "\u3000b"]);
    expect(split("qwen2", "x²y")).toEqual(["x", "²", "y"]);
    // U+FEFF is no whitespace for llama.cpp (it is for JavaScript's \s) but a format character,
    // so it joins the optional space of " ?[^\s\p{L}\p{N}]+".
    expect(split("qwen2", "a \ufeffb")).toEqual(["a", " \ufeff", "b"]);
  });

  it("llama3 groups digits by three", () => {
    expect(split("llama-bpe", "1234567 89")).toEqual(["123", "456", "7", " ", "89"]);
  });

  it("gpt2 keeps one leading space and has lower-case contractions only", () => {
    expect(split("gpt-2", "Hello  world's 123 ?!")).toEqual(["Hello", " ", " world", "'s", " 123", " ?!"]);
    expect(split("gpt-2", "I'LL")).toEqual(["I", "'", "LL"]);
  });

  for (const [name, regex] of Object.entries(ORACLES)) {
    it(`${name} splits random ASCII text where the regex does`, () => {
      const alphabet = ["a", "b", "Z", "s", "S", "t", "l", "L", "e", "E", "r", "v", "m", "d", "D", "0", "7", "'", " ", " ", "  ", "\t", "\n", "\r", "\r\n", ".", "!", "-", "_", "\u000b", "\u000c", "\u001c"];
      const random = mulberry32(name.length * 7919);
      for (let i = 0; i < 3000; i++) {
        let text = "";
        for (let j = 0, n = 1 + Math.floor(random() * 24); j < n; j++) text += alphabet[Math.floor(random() * alphabet.length)];
        expect(split(name, text), JSON.stringify(text)).toEqual(text.match(regex) ?? []);
      }
    });
  }
});
