import { DEAD, GrammarAutomaton, utf8Continue, utf8Finish, utf8Lead } from "./grammar-automaton";
import type { Grammar } from "./grammar";
import { GrammarError } from "./grammar-error";
import type { TokenTrie } from "./token-trie";

/** Where a parse stands: an automaton state and the UTF-8 character begun but not finished, if any. */
export interface GrammarPosition {
  readonly state: number;
  /** The unfinished character read so far (its bits, and its length in bits 24 and up). */
  readonly partialValue: number;
  /** Continuation bytes it still needs (0: none begun). */
  readonly partialRemaining: number;
}

/** Tokens a grammar allows next: `tokens` (sorted by piece, not by id) plus whether end of generation is. */
export interface AllowedTokens {
  readonly tokens: Int32Array;
  readonly endOfGeneration: boolean;
}

/** Masks cached per automaton; a state seen again is masked for free. */
const MASK_CACHE_ENTRIES = 512;

/**
 * Advances a position by one byte: UTF-8 is decoded on the way; a lead byte is accepted when some
 * code point it may begin can follow, so tokens that split a character are allowed as llama.cpp
 * allows them. Returns undefined when the byte cannot follow (or is not UTF-8).
 */
function stepByte(automaton: GrammarAutomaton, state: number, value: number, remaining: number, byte: number): [number, number, number] | undefined {
  if (remaining === 0) {
    if (byte < 0x80) {
      const next = automaton.step(state, byte);
      return next === DEAD ? undefined : [next, 0, 0];
    }
    if (byte < 0xc2 || byte >= 0xf5 || !automaton.leadByteAllowed(state, byte)) return undefined;
    return [state, utf8Lead(byte), byte < 0xe0 ? 1 : byte < 0xf0 ? 2 : 3];
  }
  if ((byte & 0xc0) !== 0x80) return undefined;
  if (remaining === 1) {
    const codePoint = utf8Finish(value, byte);
    const next = codePoint < 0 ? DEAD : automaton.step(state, codePoint);
    return next === DEAD ? undefined : [next, 0, 0];
  }
  const partial = utf8Continue(value, byte);
  return automaton.partialAllowed(state, partial, remaining - 1) ? [state, partial, remaining - 1] : undefined;
}

/**
 * The grammar side of constrained sampling over one vocabulary: which tokens may come next
 * (walking the token trie once, every shared prefix evaluated once, subtrees the grammar rejects
 * skipped whole), whether one token may, and advancing by the token chosen. One matcher follows
 * one generation; `fork` gives an independent copy sharing the automaton and its caches.
 */
export class GrammarMatcher {
  private position: GrammarPosition;
  private finishedByEndToken = false;

  constructor(
    readonly automaton: GrammarAutomaton,
    readonly trie: TokenTrie,
    private readonly masks: Map<string, AllowedTokens> = new Map(),
    private readonly scratch: Int32Array = new Int32Array(trie.vocabularySize),
  ) {
    this.position = { state: automaton.initialState, partialValue: 0, partialRemaining: 0 };
  }

  static create(grammar: Grammar, trie: TokenTrie): GrammarMatcher {
    return new GrammarMatcher(new GrammarAutomaton(grammar), trie);
  }

  get current(): GrammarPosition {
    return this.position;
  }

  /** The text so far is a complete match (end of generation may come now). */
  get isAccepting(): boolean {
    return this.position.partialRemaining === 0 && this.automaton.isAccepting(this.position.state);
  }

  /** Nothing but end of generation can follow (or it has been accepted). */
  get isFinished(): boolean {
    return this.finishedByEndToken || (this.position.partialRemaining === 0 && this.automaton.isFinished(this.position.state));
  }

  /** A copy at the same position, sharing the automaton and the mask cache. */
  fork(): GrammarMatcher {
    const copy = new GrammarMatcher(this.automaton, this.trie, this.masks, this.scratch);
    copy.position = this.position;
    copy.finishedByEndToken = this.finishedByEndToken;
    return copy;
  }

  reset(): void {
    this.position = { state: this.automaton.initialState, partialValue: 0, partialRemaining: 0 };
    this.finishedByEndToken = false;
  }

  /** The position after the bytes, or undefined when they cannot follow. */
  advanceBytes(bytes: Uint8Array, from: GrammarPosition = this.position): GrammarPosition | undefined {
    let state = from.state;
    let value = from.partialValue;
    let remaining = from.partialRemaining;
    for (let i = 0; i < bytes.length; i++) {
      const next = stepByte(this.automaton, state, value, remaining, bytes[i]!);
      if (!next) return undefined;
      [state, value, remaining] = next;
    }
    return { state, partialValue: value, partialRemaining: remaining };
  }

  /** Whether `token` may come next (cheap: walks only its bytes). */
  accepts(token: number): boolean {
    if (this.finishedByEndToken) return false;
    if (this.trie.isEndOfGeneration(token)) return this.isAccepting;
    const piece = this.trie.piece(token);
    return piece.length > 0 && this.advanceBytes(piece) !== undefined;
  }

  /** Advances by `token`; throws when the grammar does not allow it. */
  accept(token: number): void {
    if (!this.finishedByEndToken && this.trie.isEndOfGeneration(token) && this.isAccepting) {
      this.finishedByEndToken = true;
      return;
    }
    const piece = this.trie.piece(token);
    const next = this.finishedByEndToken || piece.length === 0 ? undefined : this.advanceBytes(piece);
    if (!next) throw new GrammarError(`token ${token} is not allowed by the grammar here`);
    this.position = next;
  }

  /** Advances by raw bytes (they may end inside a character); false, and no change, when they cannot follow. */
  tryAcceptBytes(bytes: Uint8Array): boolean {
    const next = this.finishedByEndToken ? undefined : this.advanceBytes(bytes);
    if (!next) return false;
    this.position = next;
    return true;
  }

  /** Advances by text (a forced prefix, or checking a finished output); throws when not allowed. */
  acceptText(text: string): void {
    const next = this.advanceBytes(new TextEncoder().encode(text));
    if (!next) throw new GrammarError(`the text ${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)} is not allowed by the grammar here`);
    this.position = next;
  }

  /** Every token that may come next (cached per position). */
  allowedTokens(): AllowedTokens {
    const { state, partialValue, partialRemaining } = this.position;
    if (this.finishedByEndToken) return { tokens: new Int32Array(0), endOfGeneration: false };
    const key = `${state},${partialValue},${partialRemaining}`;
    let mask = this.masks.get(key);
    if (!mask) {
      mask = this.computeAllowedTokens();
      if (this.masks.size >= MASK_CACHE_ENTRIES) this.masks.clear();
      this.masks.set(key, mask);
    }
    return mask;
  }

  /**
   * The trie walk: nodes in depth-first order, the parse position after each node kept per depth,
   * a node the grammar rejects skipped with its whole subtree.
   */
  private computeAllowedTokens(): AllowedTokens {
    const trie = this.trie;
    const automaton = this.automaton;
    const { nodeByte, nodeDepth, subtreeEnd, tokenStart, tokenEnd, tokenOrder } = trie;
    const depthCount = trie.maxDepth + 1;
    const states = new Int32Array(depthCount);
    const values = new Int32Array(depthCount);
    const remainings = new Int32Array(depthCount);
    states[0] = this.position.state;
    values[0] = this.position.partialValue;
    remainings[0] = this.position.partialRemaining;
    const allowed = this.scratch;
    let count = 0;
    let node = 1;
    const nodeCount = trie.nodeCount;
    while (node < nodeCount) {
      const depth = nodeDepth[node]!;
      const parent = depth - 1;
      const byte = nodeByte[node]!;
      const parentState = states[parent]!;
      const remaining = remainings[parent]!;
      if (remaining === 0) {
        if (byte < 0x80) {
          // The common case: one read of the state's cached ASCII table.
          let state = automaton.asciiTable(parentState)[byte]!;
          if (state < DEAD) state = automaton.step(parentState, byte);
          if (state === DEAD) {
            node = subtreeEnd[node]!;
            continue;
          }
          states[depth] = state;
          remainings[depth] = 0;
        } else {
          if (byte < 0xc2 || byte >= 0xf5 || !automaton.leadByteAllowed(parentState, byte)) {
            node = subtreeEnd[node]!;
            continue;
          }
          states[depth] = parentState;
          values[depth] = utf8Lead(byte);
          remainings[depth] = byte < 0xe0 ? 1 : byte < 0xf0 ? 2 : 3;
        }
      } else {
        if ((byte & 0xc0) !== 0x80) {
          node = subtreeEnd[node]!;
          continue;
        }
        if (remaining === 1) {
          const codePoint = utf8Finish(values[parent]!, byte);
          const state = codePoint < 0 ? DEAD : automaton.step(parentState, codePoint);
          if (state === DEAD) {
            node = subtreeEnd[node]!;
            continue;
          }
          states[depth] = state;
          remainings[depth] = 0;
        } else {
          const partial = utf8Continue(values[parent]!, byte);
          if (!automaton.partialAllowed(parentState, partial, remaining - 1)) {
            node = subtreeEnd[node]!;
            continue;
          }
          states[depth] = parentState;
          values[depth] = partial;
          remainings[depth] = remaining - 1;
        }
      }
      for (let i = tokenStart[node]!, end = tokenEnd[node]!; i < end; i++) allowed[count++] = tokenOrder[i]!;
      node++;
    }
    return { tokens: allowed.slice(0, count), endOfGeneration: this.isAccepting };
  }
}
