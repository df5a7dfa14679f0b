import { splitGpt2 } from "./split-gpt2";
import { splitLlama3Style } from "./split-llama3-style";
import { TokenizerError } from "./tokenizer-error";

/**
 * How one `tokenizer.ggml.pre` value turns text into words before BPE, and the vocabulary options
 * llama.cpp attaches to it (llama-vocab.cpp `load` and `llm_tokenizer_bpe`).
 */
export interface PreTokenizer {
  /** Canonical name. */
  readonly name: string;
  /** The `tokenizer.ggml.pre` values llama.cpp maps to this pre-tokenizer. */
  readonly names: readonly string[];
  /** The regex llama.cpp's hand-written splitter implements (documentation only). */
  readonly regex: string;
  /** Pushes the end index of each word of `codepoints[0, length)` onto `ends`. */
  readonly split: (codepoints: Uint32Array, length: number, ends: number[]) => void;
  /** A word that is itself a token is emitted whole, without merging. */
  readonly ignoreMerges: boolean;
  /** Detokenizing removes spaces before punctuation and contractions. */
  readonly cleanSpaces: boolean;
  /** Whether BOS is added when the metadata has no `tokenizer.ggml.add_bos_token`. */
  readonly addBosByDefault: boolean;
}

const LLAMA3_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** One entry per pre-tokenizer. */
export const PRE_TOKENIZERS: readonly PreTokenizer[] = [
  {
    name: "qwen2",
    names: ["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"],
    regex:
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    split: (codepoints, length, ends) => splitLlama3Style(codepoints, length, 1, ends),
    ignoreMerges: false,
    cleanSpaces: false,
    addBosByDefault: false,
  },
  {
    name: "llama3",
    names: ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"],
    regex: LLAMA3_REGEX,
    split: (codepoints, length, ends) => splitLlama3Style(codepoints, length, 3, ends),
    ignoreMerges: true,
    cleanSpaces: true,
    addBosByDefault: true,
  },
  {
    name: "gpt2",
    names: ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert"],
    regex: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    split: splitGpt2,
    ignoreMerges: false,
    cleanSpaces: true,
    addBosByDefault: false,
  },
];

/** The pre-tokenizer for a `tokenizer.ggml.pre` value; throws TokenizerError for unsupported ones. */
export function findPreTokenizer(name: string): PreTokenizer {
  const found = PRE_TOKENIZERS.find((entry) => entry.names.includes(name));
  if (!found) {
    const known = PRE_TOKENIZERS.flatMap((entry) => entry.names).join(", ");
    throw new TokenizerError(`tokenizer.ggml.pre: unsupported pre-tokenizer "${name}" (supported: ${known})`);
  }
  return found;
}
