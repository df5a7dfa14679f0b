import { BpeModel } from "./bpe-model";
import { CODEPOINT_TO_BYTE } from "./byte-level-encoding";
import { type ChatMessage, type ChatTemplateOptions, CHATML_TEMPLATE, ChatTemplate } from "./chat-template";
import { type SpecialTokenPattern, partitionSpecialTokens } from "./partition-special-tokens";
import { type PreTokenizer, findPreTokenizer } from "./pre-tokenizers";
import { StreamingDecoder } from "./streaming-decoder";
import { type ResolvedTokenAttributes, TokenAttribute, resolveTokenAttributes } from "./token-attributes";
import { WordCache } from "./word-cache";
import { TokenizerError } from "./tokenizer-error";
import type { TokenizerVocabulary } from "./tokenizer-vocabulary";
import { type MetadataGetter, vocabularyFromGGUFMetadata } from "./vocabulary-from-gguf-metadata";

export interface EncodeOptions {
  /**
   * Parse special (CONTROL) tokens such as `<|im_start|>` in the text. Default false: they are
   * tokenized as plain text, like llama.cpp with `parse_special = false`. USER_DEFINED tokens such
   * as `<think>` are always matched whole, as in llama.cpp.
   */
  readonly special?: boolean;
  /** Prepend BOS. Default: the vocabulary's `add_bos_token` (false for Qwen). */
  readonly addBos?: boolean;
  /** Append EOS. Default: the vocabulary's `add_eos_token` (false when absent). */
  readonly addEos?: boolean;
}

/** llama.cpp's fill-in-the-middle tokens of a vocabulary (see `Tokenizer.fillInMiddleTokens`). */
export interface FillInMiddleTokens {
  readonly prefix: number | undefined;
  readonly suffix: number | undefined;
  readonly middle: number | undefined;
  readonly pad: number | undefined;
  /** Repository-level FIM: the repository's name follows it. */
  readonly repository: number | undefined;
  /** Repository-level FIM: a file's name and text follow it. */
  readonly separator: number | undefined;
}

export interface DecodeOptions {
  /** Render CONTROL/UNKNOWN tokens (`<|im_end|>`); default false renders them as nothing. */
  readonly special?: boolean;
  /**
   * Remove spaces before punctuation and some contractions, as llama.cpp's `detokenize` does for
   * vocabularies with `clean_spaces` (gpt2, llama3; not qwen2). Default: the pre-tokenizer's setting.
   */
  readonly cleanUpSpaces?: boolean;
}

const REPLACEMENT_CHARACTER = 0xfffd;

/**
 * A byte-level BPE tokenizer that gives the same tokens as llama.cpp for the same GGUF vocabulary.
 */
export class Tokenizer {
  readonly vocabulary: TokenizerVocabulary;
  readonly preTokenizer: PreTokenizer;
  /** Special token ids and attributes as llama.cpp resolves them. */
  readonly specials: ResolvedTokenAttributes;
  readonly addBos: boolean;
  readonly addEos: boolean;

  private readonly tokenTexts: readonly string[];
  private readonly tokenIds: Map<string, number>;
  private readonly bpe: BpeModel;
  private readonly specialPatterns: SpecialTokenPattern[];
  private readonly wordCache = new WordCache();
  private readonly pieces: Array<Uint8Array | undefined>;
  private chatTemplate: ChatTemplate | undefined;

  // Reused buffers for encoding.
  private codepoints = new Uint32Array(1024);
  private wordBytes = new Uint8Array(1024);
  private readonly wordEnds: number[] = [];
  private readonly wordTokens: number[] = [];

  constructor(vocabulary: TokenizerVocabulary) {
    if ((vocabulary.model ?? "gpt2") !== "gpt2") {
      throw new TokenizerError(`tokenizer.ggml.model: unsupported tokenizer model "${vocabulary.model}"`);
    }
    if (vocabulary.tokens.length === 0) throw new TokenizerError("tokenizer.ggml.tokens: empty");
    this.vocabulary = vocabulary;
    this.preTokenizer = findPreTokenizer(vocabulary.preTokenizer);
    // llama.cpp replaces empty token texts so that every text maps to one id.
    this.tokenTexts = vocabulary.tokens.map((text, id) => (text === "" ? `[EMPTY_${id}]` : text));
    this.tokenIds = new Map();
    for (let id = 0; id < this.tokenTexts.length; id++) this.tokenIds.set(this.tokenTexts[id] ?? "", id);
    this.specials = resolveTokenAttributes({ ...vocabulary, tokens: this.tokenTexts });
    this.addBos = vocabulary.addBos ?? this.preTokenizer.addBosByDefault;
    this.addEos = vocabulary.addEos ?? false;
    this.bpe = new BpeModel(this.tokenIds, this.tokenTexts.length, vocabulary.merges, {
      ignoreMerges: this.preTokenizer.ignoreMerges,
    });
    this.pieces = new Array<Uint8Array | undefined>(this.tokenTexts.length);

    const utf8 = new TextEncoder();
    const attributes = this.specials.attributes;
    const matchedWhole = TokenAttribute.CONTROL | TokenAttribute.USER_DEFINED | TokenAttribute.UNKNOWN;
    this.specialPatterns = [];
    for (let id = 0; id < attributes.length; id++) {
      const attribute = attributes[id] ?? 0;
      if (!(attribute & matchedWhole)) continue;
      this.specialPatterns.push({
        id,
        text: this.tokenTexts[id] ?? "",
        onlyWhenParsingSpecial: (attribute & (TokenAttribute.CONTROL | TokenAttribute.UNKNOWN)) !== 0,
        lstrip: (attribute & TokenAttribute.LSTRIP) !== 0,
        rstrip: (attribute & TokenAttribute.RSTRIP) !== 0,
      });
    }
    const byteLength = new Map(this.specialPatterns.map((pattern) => [pattern.id, utf8.encode(pattern.text).length]));
    this.specialPatterns.sort((a, b) => (byteLength.get(b.id) ?? 0) - (byteLength.get(a.id) ?? 0) || a.id - b.id);
  }

  static fromVocabulary(vocabulary: TokenizerVocabulary): Tokenizer {
    return new Tokenizer(vocabulary);
  }

  /** From GGUF metadata, e.g. `Tokenizer.fromGGUFMetadata((key) => file.get(key))`. */
  static fromGGUFMetadata(get: MetadataGetter): Tokenizer {
    return new Tokenizer(vocabularyFromGGUFMetadata(get));
  }

  /** Number of tokens in the vocabulary (ids are 0 … size-1). */
  get vocabularySize(): number {
    return this.tokenTexts.length;
  }

  get bosTokenId(): number | undefined {
    return this.specials.bosTokenId;
  }
  get eosTokenId(): number | undefined {
    return this.specials.eosTokenId;
  }
  get eotTokenId(): number | undefined {
    return this.specials.eotTokenId;
  }
  get paddingTokenId(): number | undefined {
    return this.specials.paddingTokenId;
  }
  /**
   * The fill-in-the-middle tokens (llama.cpp's `llama_vocab_fim_*`): named by the metadata, else
   * found by their text (Qwen's `<|fim_prefix|>`, `<|fim_suffix|>`, `<|fim_middle|>`, `<|fim_pad|>`,
   * `<|repo_name|>`, `<|file_sep|>`); undefined where the vocabulary has none.
   */
  get fillInMiddleTokens(): FillInMiddleTokens {
    const s = this.specials;
    return { prefix: s.fimPrefixTokenId, suffix: s.fimSuffixTokenId, middle: s.fimMiddleTokenId, pad: s.fimPadTokenId, repository: s.fimRepoTokenId, separator: s.fimSeparatorTokenId };
  }

  /** Tokens that end generation (EOS, EOT, `<|im_end|>`, `<|endoftext|>`, FIM pad/repo/separator…). */
  get endOfGenerationTokenIds(): ReadonlySet<number> {
    return this.specials.endOfGenerationTokenIds;
  }

  isEndOfGeneration(id: number): boolean {
    return this.specials.endOfGenerationTokenIds.has(id);
  }

  /** `TokenAttribute` bits of a token. */
  tokenAttributes(id: number): number {
    this.checkId(id);
    return this.specials.attributes[id] ?? 0;
  }

  /** The token's text as stored in the vocabulary (byte-level encoded for normal tokens: "Ġthe"). */
  tokenText(id: number): string {
    this.checkId(id);
    return this.tokenTexts[id] ?? "";
  }

  /** The id of a vocabulary text, if any. */
  tokenId(text: string): number | undefined {
    return this.tokenIds.get(text);
  }

  /** Tokens of `text` (llama.cpp `llama_tokenize`). */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const out: number[] = [];
    if (options.addBos ?? this.addBos) {
      if (this.specials.bosTokenId === undefined) throw new TokenizerError("addBos: the vocabulary has no BOS token");
      out.push(this.specials.bosTokenId);
    }
    for (const fragment of partitionSpecialTokens(text, this.specialPatterns, options.special ?? false)) {
      if ("token" in fragment) out.push(fragment.token);
      else this.encodeText(text, fragment.start, fragment.end, out);
    }
    if (options.addEos ?? this.addEos) {
      if (this.specials.eosTokenId === undefined) throw new TokenizerError("addEos: the vocabulary has no EOS token");
      out.push(this.specials.eosTokenId);
    }
    return out;
  }

  /** Forgets the cached tokens of words seen so far. */
  clearCache(): void {
    this.wordCache.clear();
  }

  /**
   * The bytes a token stands for (llama.cpp `token_to_piece` without lstrip): nothing for
   * CONTROL/UNKNOWN tokens unless `special`, nothing for UNUSED/UNDEFINED tokens. The array is
   * cached and shared: do not modify it.
   */
  tokenPiece(id: number, options: { readonly special?: boolean } = {}): Uint8Array {
    this.checkId(id);
    if (!options.special && this.hiddenUnlessSpecial(id)) return EMPTY;
    let piece = this.pieces[id];
    if (!piece) {
      piece = this.renderPiece(id, this.specials.attributes[id] ?? 0);
      this.pieces[id] = piece;
    }
    return piece;
  }

  /** CONTROL and UNKNOWN tokens render as nothing unless special tokens are asked for. */
  private hiddenUnlessSpecial(id: number): boolean {
    return ((this.specials.attributes[id] ?? 0) & (TokenAttribute.CONTROL | TokenAttribute.UNKNOWN)) !== 0;
  }

  /** The UTF-8 bytes of some tokens (llama.cpp `llama_detokenize`, without removing BOS/EOS). */
  decodeBytes(ids: ArrayLike<number>, options: DecodeOptions = {}): Uint8Array {
    const special = options.special ?? false;
    const pieces: Uint8Array[] = new Array(ids.length);
    let total = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? -1;
      const piece = this.pieces[id] ?? this.tokenPiece(id, { special: true });
      pieces[i] = !special && this.hiddenUnlessSpecial(id) ? EMPTY : piece;
      total += pieces[i]?.length ?? 0;
    }
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const piece of pieces) {
      bytes.set(piece, offset);
      offset += piece.length;
    }
    return (options.cleanUpSpaces ?? this.preTokenizer.cleanSpaces) ? cleanUpSpaces(bytes) : bytes;
  }

  /** The text of some tokens; invalid UTF-8 (a sequence cut mid-character) becomes U+FFFD. */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    return UTF8_DECODER.decode(this.decodeBytes(ids, options));
  }

  /** A decoder fed one token at a time that never emits half a UTF-8 character. */
  createStreamingDecoder(options: { readonly special?: boolean } = {}): StreamingDecoder {
    return new StreamingDecoder((id) => this.tokenPiece(id, options));
  }

  /**
   * Renders a conversation with the vocabulary's `tokenizer.chat_template`, or ChatML when it has
   * none. Encode the result with `{ special: true }`.
   */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!this.chatTemplate) {
      const text = (id: number | undefined): string | undefined => (id === undefined ? undefined : this.tokenTexts[id]);
      this.chatTemplate = new ChatTemplate(this.vocabulary.chatTemplate ?? CHATML_TEMPLATE, {
        bosToken: text(this.specials.bosTokenId),
        eosToken: text(this.specials.eosTokenId),
      });
    }
    return this.chatTemplate.render(messages, options);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.tokenTexts.length) {
      throw new RangeError(`token id ${id} is outside the vocabulary (0…${this.tokenTexts.length - 1})`);
    }
  }

  private renderPiece(id: number, attribute: number): Uint8Array {
    const text = this.tokenTexts[id] ?? "";
    if (attribute & (TokenAttribute.CONTROL | TokenAttribute.UNKNOWN | TokenAttribute.USER_DEFINED)) {
      return UTF8_ENCODER.encode(text);
    }
    if (attribute & TokenAttribute.NORMAL) return byteLevelDecode(text);
    if (attribute & TokenAttribute.BYTE) return Uint8Array.of(Number.parseInt(text.slice(3, 5), 16) & 0xff);
    return EMPTY;
  }

  /** Pre-tokenizes `text[start, end)` and appends the BPE tokens of every word to `out`. */
  private encodeText(text: string, start: number, end: number, out: number[]): void {
    const capacity = end - start;
    if (this.codepoints.length < capacity) {
      this.codepoints = new Uint32Array(capacity);
    }
    const codepoints = this.codepoints;
    let count = 0;
    for (let i = start; i < end; ) {
      let codepoint = text.charCodeAt(i);
      if (codepoint >= 0xd800 && codepoint <= 0xdfff) {
        const low = i + 1 < end ? text.charCodeAt(i + 1) : 0;
        if (codepoint <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
          codepoint = 0x10000 + ((codepoint - 0xd800) << 10) + (low - 0xdc00);
          i += 2;
        } else {
          codepoint = REPLACEMENT_CHARACTER; // a lone surrogate, as UTF-8 conversion replaces it
          i += 1;
        }
      } else {
        i += 1;
      }
      codepoints[count++] = codepoint;
    }

    const ends = this.wordEnds;
    ends.length = 0;
    this.preTokenizer.split(codepoints, count, ends);

    const cache = this.wordCache;
    let wordStart = 0;
    for (const wordEnd of ends) {
      const hash = WordCache.hash(codepoints, wordStart, wordEnd);
      if (!cache.appendTokens(codepoints, wordStart, wordEnd, hash, out)) {
        const tokens = this.encodeWord(codepoints, wordStart, wordEnd);
        cache.set(codepoints, wordStart, wordEnd, hash, tokens);
        for (const token of tokens) out.push(token);
      }
      wordStart = wordEnd;
    }
  }

  private encodeWord(codepoints: Uint32Array, start: number, end: number): readonly number[] {
    if (this.wordBytes.length < (end - start) * 4) this.wordBytes = new Uint8Array((end - start) * 4);
    const bytes = this.wordBytes;
    let length = 0;
    for (let i = start; i < end; i++) {
      const codepoint = codepoints[i] ?? 0;
      if (codepoint < 0x80) {
        bytes[length++] = codepoint;
      } else if (codepoint < 0x800) {
        bytes[length++] = 0xc0 | (codepoint >> 6);
        bytes[length++] = 0x80 | (codepoint & 0x3f);
      } else if (codepoint < 0x10000) {
        bytes[length++] = 0xe0 | (codepoint >> 12);
        bytes[length++] = 0x80 | ((codepoint >> 6) & 0x3f);
        bytes[length++] = 0x80 | (codepoint & 0x3f);
      } else {
        bytes[length++] = 0xf0 | (codepoint >> 18);
        bytes[length++] = 0x80 | ((codepoint >> 12) & 0x3f);
        bytes[length++] = 0x80 | ((codepoint >> 6) & 0x3f);
        bytes[length++] = 0x80 | (codepoint & 0x3f);
      }
    }
    const tokens = this.wordTokens;
    tokens.length = 0;
    this.bpe.encodeWord(bytes, length, tokens);
    return tokens;
  }
}

const EMPTY = new Uint8Array(0);
const UTF8_ENCODER = new TextEncoder();
const UTF8_DECODER = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * A normal token's bytes from its byte-level text (llama.cpp `llama_decode_text`); a character that
 * encodes no byte becomes "[UNK_BYTE_0x…]" as in llama.cpp.
 */
function byteLevelDecode(text: string): Uint8Array {
  const bytes: number[] = [];
  for (const character of text) {
    const codepoint = character.codePointAt(0) ?? 0;
    const byte = codepoint < CODEPOINT_TO_BYTE.length ? (CODEPOINT_TO_BYTE[codepoint] ?? -1) : -1;
    if (byte >= 0) {
      bytes.push(byte);
      continue;
    }
    const utf8 = UTF8_ENCODER.encode(character);
    const hex = Array.from(utf8, (b) => b.toString(16).padStart(2, "0")).join("");
    bytes.push(...UTF8_ENCODER.encode(`[UNK_BYTE_0x${hex}${text}]`));
  }
  return Uint8Array.from(bytes);
}

/** llama.cpp `detokenize`'s `clean_spaces` passes, byte for byte. */
function cleanUpSpaces(input: Uint8Array): Uint8Array {
  const text = input.slice();
  const SPACE = 0x20;
  const APOSTROPHE = 0x27;
  const ch = (c: string): number => c.charCodeAt(0);

  // first pass: " ?", " !", " .", " ," lose the space
  const total1 = text.length;
  let total = total1 ? 1 : 0;
  for (let i = 1; i < total1; i++) {
    const x = text[i] ?? 0;
    if (text[i - 1] === SPACE && (x === ch("?") || x === ch("!") || x === ch(".") || x === ch(","))) total--;
    text[total++] = x;
  }

  // second pass: " ' " becomes "'"
  const total2 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total2; i++) {
    const x = text[i] ?? 0;
    if (x === APOSTROPHE && i + 1 < total2 && text[i - 1] === SPACE && text[i + 1] === SPACE) {
      total--;
      text[++i] = 0;
    }
    text[total++] = x;
  }

  // third pass: " 's", " 'm", " 're", " 've" lose the space
  const total3 = total;
  total = total ? 1 : 0;
  for (let i = 1; i < total3; i++) {
    const x = text[i] ?? 0;
    if (text[i - 1] === SPACE && x === APOSTROPHE && i + 1 < total3) {
      const x1 = text[i + 1];
      if (x1 === ch("s") || x1 === ch("m")) {
        total--;
      } else if (x1 !== ch("t") && x1 !== ch("d") && i + 2 < total3) {
        const x2 = text[i + 2];
        if ((x1 === ch("r") && x2 === ch("e")) || (x1 === ch("v") && x2 === ch("e"))) total--;
      }
    }
    text[total++] = x;
  }
  return text.subarray(0, total);
}
