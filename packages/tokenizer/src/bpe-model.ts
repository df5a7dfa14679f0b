import { BYTE_TO_CODEPOINT } from "./byte-level-encoding";

const NO_TOKEN = -1;
/** Words of at most this many bytes are merged by scanning instead of with a heap. */
const SHORT_WORD_LIMIT = 256;

/**
 * Byte-level BPE merging as llama.cpp's `llm_tokenizer_bpe_session` does it: a word's bytes start as
 * one symbol each; the adjacent pair with the lowest merge rank (leftmost on ties) is merged until
 * no pair has a rank; each final symbol becomes its token, or, when its text is no token, one token
 * per byte that is itself a token.
 *
 * Symbols are interned strings: every token text and every string a merge mentions gets an id
 * (token texts keep their token id), so merging works on integers.
 */
export class BpeModel {
  /** Symbol id → token id, or NO_TOKEN for merge strings that are no token. */
  private readonly symbolToken: Int32Array;
  /** Symbol id → text. */
  private readonly symbolTexts: string[];
  /** Text → symbol id. */
  private readonly symbolIds = new Map<string, number>();
  /** (left symbol, right symbol) → merge rank. */
  private readonly mergeRanks: PairTable;
  /** Merge rank → the symbol of the merged text. */
  private readonly mergeResults: Int32Array;
  /** Byte → the symbol of its byte-level character. */
  private readonly byteSymbols = new Int32Array(256);
  /** Whether a word that is itself a token skips merging (llama3's `ignore_merges`). */
  private readonly ignoreMerges: boolean;

  // Reused work buffers, grown as needed.
  private symbols = new Int32Array(64);
  private next = new Int32Array(64);
  private previous = new Int32Array(64);
  private heap = new BpeHeap();
  private readonly shortWordLimit: number;
  private readonly shortSymbols: Int32Array;
  private readonly shortRanks: Int32Array;

  /**
   * @param tokenIds text → token id (llama.cpp `token_to_id`, later tokens win on duplicate texts).
   * @param merges "left right" strings; rank = index; the first of duplicate pairs wins.
   * @param options.shortWordLimit words up to this many bytes are merged without a heap (same result).
   */
  constructor(
    tokenIds: ReadonlyMap<string, number>,
    tokenCount: number,
    merges: readonly string[],
    options: { readonly ignoreMerges: boolean; readonly shortWordLimit?: number },
  ) {
    this.ignoreMerges = options.ignoreMerges;
    this.shortWordLimit = options.shortWordLimit ?? SHORT_WORD_LIMIT;
    this.shortSymbols = new Int32Array(this.shortWordLimit);
    this.shortRanks = new Int32Array(this.shortWordLimit);
    const texts: string[] = new Array<string>(tokenCount).fill("");
    for (const [text, id] of tokenIds) {
      texts[id] = text;
      this.symbolIds.set(text, id);
    }
    this.symbolTexts = texts;
    const intern = (text: string): number => {
      let id = this.symbolIds.get(text);
      if (id === undefined) {
        id = texts.length;
        texts.push(text);
        this.symbolIds.set(text, id);
      }
      return id;
    };

    const lefts = new Int32Array(merges.length).fill(-1);
    const rights = new Int32Array(merges.length);
    const merged = new Int32Array(merges.length);
    for (let rank = 0; rank < merges.length; rank++) {
      const merge = merges[rank] ?? "";
      const space = merge.indexOf(" ", 1);
      if (space < 0) continue; // llama.cpp records ("", ""), which no pair of symbols ever matches
      const left = merge.slice(0, space);
      const right = merge.slice(space + 1);
      lefts[rank] = intern(left);
      rights[rank] = intern(right);
      merged[rank] = intern(left + right);
    }
    for (let byte = 0; byte < 256; byte++) this.byteSymbols[byte] = intern(String.fromCharCode(BYTE_TO_CODEPOINT[byte] ?? 0));

    this.symbolToken = new Int32Array(texts.length).fill(NO_TOKEN);
    for (const id of tokenIds.values()) this.symbolToken[id] = id;

    this.mergeResults = merged;
    this.mergeRanks = new PairTable(merges.length);
    for (let rank = 0; rank < merges.length; rank++) {
      const left = lefts[rank] ?? -1;
      if (left >= 0) this.mergeRanks.addIfAbsent(left, rights[rank] ?? 0, rank);
    }
  }

  /** Number of merges with a distinct pair. */
  get mergeCount(): number {
    return this.mergeRanks.size;
  }

  /**
   * Appends the tokens of one pre-token word, given as its UTF-8 bytes, to `out`.
   */
  encodeWord(bytes: Uint8Array, length: number, out: number[]): void {
    if (length === 0) return;
    if (this.ignoreMerges) {
      let text = "";
      for (let i = 0; i < length; i++) text += String.fromCharCode(BYTE_TO_CODEPOINT[bytes[i] ?? 0] ?? 0);
      const symbol = this.symbolIds.get(text);
      const token = symbol === undefined ? NO_TOKEN : (this.symbolToken[symbol] ?? NO_TOKEN);
      if (token !== NO_TOKEN) {
        out.push(token);
        return;
      }
    }
    if (length === 1) {
      this.emitSymbol(this.byteSymbols[bytes[0] ?? 0] ?? 0, out);
      return;
    }
    if (length <= this.shortWordLimit) {
      this.mergeShortWord(bytes, length, out);
      return;
    }
    if (this.symbols.length < length) {
      const size = Math.max(length, this.symbols.length * 2);
      this.symbols = new Int32Array(size);
      this.next = new Int32Array(size);
      this.previous = new Int32Array(size);
    }
    const symbols = this.symbols;
    const next = this.next;
    const previous = this.previous;
    for (let i = 0; i < length; i++) {
      symbols[i] = this.byteSymbols[bytes[i] ?? 0] ?? 0;
      next[i] = i + 1 < length ? i + 1 : -1;
      previous[i] = i - 1;
    }

    const heap = this.heap;
    heap.clear();
    for (let i = 0; i + 1 < length; i++) this.pushPair(i, i + 1);

    while (heap.size > 0) {
      const left = heap.topLeft();
      const right = heap.topRight();
      const leftSymbol = heap.topLeftSymbol();
      const rightSymbol = heap.topRightSymbol();
      const rank = heap.topRank();
      heap.pop();
      // Skip pairs that an earlier merge changed (llama.cpp compares the texts).
      if (symbols[left] !== leftSymbol || symbols[right] !== rightSymbol || next[left] !== right) continue;

      symbols[left] = this.mergeResults[rank] ?? 0;
      symbols[right] = -1;
      const after = next[right] ?? -1;
      next[left] = after;
      if (after >= 0) previous[after] = left;
      const before = previous[left] ?? -1;
      if (before >= 0) this.pushPair(before, left);
      if (after >= 0) this.pushPair(left, after);
    }

    for (let i = 0; i >= 0; i = next[i] ?? -1) this.emitSymbol(symbols[i] ?? 0, out);
  }

  /**
   * The same merging for short words, without a heap: scan the adjacent pairs for the lowest rank
   * (leftmost on ties), merge, update the two pairs around the merge.
   */
  private mergeShortWord(bytes: Uint8Array, length: number, out: number[]): void {
    const symbols = this.shortSymbols;
    const ranks = this.shortRanks;
    const table = this.mergeRanks;
    for (let i = 0; i < length; i++) symbols[i] = this.byteSymbols[bytes[i] ?? 0] ?? 0;
    for (let i = 0; i + 1 < length; i++) ranks[i] = table.get(symbols[i] ?? 0, symbols[i + 1] ?? 0);
    let count = length;
    for (;;) {
      let best = -1;
      let bestRank = 0x7fffffff;
      for (let i = 0; i + 1 < count; i++) {
        const rank = ranks[i] ?? -1;
        if (rank >= 0 && rank < bestRank) {
          bestRank = rank;
          best = i;
        }
      }
      if (best < 0) break;
      symbols[best] = this.mergeResults[bestRank] ?? 0;
      for (let i = best + 1; i + 1 < count; i++) {
        symbols[i] = symbols[i + 1] ?? 0;
        ranks[i] = ranks[i + 1] ?? -1;
      }
      count--;
      if (best > 0) ranks[best - 1] = table.get(symbols[best - 1] ?? 0, symbols[best] ?? 0);
      if (best + 1 < count) ranks[best] = table.get(symbols[best] ?? 0, symbols[best + 1] ?? 0);
    }
    for (let i = 0; i < count; i++) this.emitSymbol(symbols[i] ?? 0, out);
  }

  private pushPair(left: number, right: number): void {
    const leftSymbol = this.symbols[left] ?? 0;
    const rightSymbol = this.symbols[right] ?? 0;
    const rank = this.mergeRanks.get(leftSymbol, rightSymbol);
    if (rank < 0) return;
    this.heap.push(rank, left, right, leftSymbol, rightSymbol);
  }

  private emitSymbol(symbol: number, out: number[]): void {
    const token = this.symbolToken[symbol] ?? NO_TOKEN;
    if (token !== NO_TOKEN) {
      out.push(token);
      return;
    }
    // llama.cpp: one token per byte of the symbol's (byte-level, UTF-8) text that is a token itself;
    // only single ASCII characters can be.
    const text = this.symbolTexts[symbol] ?? "";
    const utf8 = new TextEncoder().encode(text);
    for (const byte of utf8) {
      if (byte >= 0x80) continue;
      const id = this.symbolIds.get(String.fromCharCode(byte));
      const byteToken = id === undefined ? NO_TOKEN : (this.symbolToken[id] ?? NO_TOKEN);
      if (byteToken !== NO_TOKEN) out.push(byteToken);
    }
  }
}

/** (left symbol, right symbol) → rank, open addressing over typed arrays; the first rank added wins. */
class PairTable {
  size = 0;
  private readonly mask: number;
  private readonly lefts: Int32Array;
  private readonly rights: Int32Array;
  private readonly ranks: Int32Array;

  constructor(expected: number) {
    let capacity = 16;
    while (capacity < expected * 2) capacity *= 2;
    this.mask = capacity - 1;
    this.lefts = new Int32Array(capacity);
    this.rights = new Int32Array(capacity);
    this.ranks = new Int32Array(capacity).fill(-1);
  }

  private static slot(left: number, right: number, mask: number): number {
    let hash = Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 0x7f4a7c15, 0x85ebca77);
    hash ^= hash >>> 15;
    return hash & mask;
  }

  /** The rank of the pair, or -1. */
  get(left: number, right: number): number {
    let slot = PairTable.slot(left, right, this.mask);
    for (;;) {
      const rank = this.ranks[slot] ?? -1;
      if (rank < 0) return -1;
      if (this.lefts[slot] === left && this.rights[slot] === right) return rank;
      slot = (slot + 1) & this.mask;
    }
  }

  addIfAbsent(left: number, right: number, rank: number): void {
    let slot = PairTable.slot(left, right, this.mask);
    for (;;) {
      const existing = this.ranks[slot] ?? -1;
      if (existing < 0) break;
      if (this.lefts[slot] === left && this.rights[slot] === right) return;
      slot = (slot + 1) & this.mask;
    }
    this.lefts[slot] = left;
    this.rights[slot] = right;
    this.ranks[slot] = rank;
    this.size++;
  }
}

/** A binary min-heap of candidate merges ordered by (rank, left position), in parallel typed arrays. */
class BpeHeap {
  size = 0;
  private ranks = new Int32Array(64);
  private lefts = new Int32Array(64);
  private rights = new Int32Array(64);
  private leftSymbols = new Int32Array(64);
  private rightSymbols = new Int32Array(64);

  clear(): void {
    this.size = 0;
  }

  topRank(): number {
    return this.ranks[0] ?? 0;
  }
  topLeft(): number {
    return this.lefts[0] ?? 0;
  }
  topRight(): number {
    return this.rights[0] ?? 0;
  }
  topLeftSymbol(): number {
    return this.leftSymbols[0] ?? 0;
  }
  topRightSymbol(): number {
    return this.rightSymbols[0] ?? 0;
  }

  push(rank: number, left: number, right: number, leftSymbol: number, rightSymbol: number): void {
    if (this.size === this.ranks.length) this.grow();
    let index = this.size++;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.less(rank, left, parent)) break;
      this.move(parent, index);
      index = parent;
    }
    this.set(index, rank, left, right, leftSymbol, rightSymbol);
  }

  pop(): void {
    const last = --this.size;
    if (last === 0) return;
    const rank = this.ranks[last] ?? 0;
    const left = this.lefts[last] ?? 0;
    const right = this.rights[last] ?? 0;
    const leftSymbol = this.leftSymbols[last] ?? 0;
    const rightSymbol = this.rightSymbols[last] ?? 0;
    let index = 0;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= last) break;
      if (child + 1 < last && this.lessAt(child + 1, child)) child++;
      if (!this.less(this.ranks[child] ?? 0, this.lefts[child] ?? 0, index, rank, left)) break;
      this.move(child, index);
      index = child;
    }
    this.set(index, rank, left, right, leftSymbol, rightSymbol);
  }

  /** Whether (rank, left) orders before the entry at `at` (or before (atRank, atLeft) when given). */
  private less(rank: number, left: number, at: number, atRank?: number, atLeft?: number): boolean {
    const otherRank = atRank ?? this.ranks[at] ?? 0;
    const otherLeft = atLeft ?? this.lefts[at] ?? 0;
    return rank < otherRank || (rank === otherRank && left < otherLeft);
  }

  private lessAt(a: number, b: number): boolean {
    return this.less(this.ranks[a] ?? 0, this.lefts[a] ?? 0, b);
  }

  private move(from: number, to: number): void {
    this.set(to, this.ranks[from] ?? 0, this.lefts[from] ?? 0, this.rights[from] ?? 0, this.leftSymbols[from] ?? 0, this.rightSymbols[from] ?? 0);
  }

  private set(index: number, rank: number, left: number, right: number, leftSymbol: number, rightSymbol: number): void {
    this.ranks[index] = rank;
    this.lefts[index] = left;
    this.rights[index] = right;
    this.leftSymbols[index] = leftSymbol;
    this.rightSymbols[index] = rightSymbol;
  }

  private grow(): void {
    const size = this.ranks.length * 2;
    const grown = (array: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> => {
      const bigger = new Int32Array(size);
      bigger.set(array);
      return bigger;
    };
    this.ranks = grown(this.ranks);
    this.lefts = grown(this.lefts);
    this.rights = grown(this.rights);
    this.leftSymbols = grown(this.leftSymbols);
    this.rightSymbols = grown(this.rightSymbols);
  }
}
