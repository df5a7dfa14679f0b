import { type CharacterClass, type Grammar, classContains, classIntersects } from "./grammar";
import { GrammarError } from "./grammar-error";

const END = 0;
const CHARACTERS = 1;
const RULE = 2;

/** A dead transition: no parse survives the character. */
export const DEAD = -1;
const UNKNOWN = -2;
/** The empty stack: the grammar has matched the whole input. */
const EMPTY_STACK = 0;
/** Most parse stacks one state may hold; beyond it the grammar is too ambiguous to track. */
export const MAX_STACKS_PER_STATE = 4096;
/** An unfinished UTF-8 character is its bits so far plus its total length in bits 24 and up. */
const UTF8_BITS = 0xffffff;
/** Smallest code point of a UTF-8 sequence of each length (anything less is an overlong form). */
const UTF8_MINIMUM = [0, 0, 0x80, 0x800, 0x10000];

/** The unfinished character begun by a lead byte (0xC2…0xF4). */
export function utf8Lead(byte: number): number {
  const length = byte < 0xe0 ? 2 : byte < 0xf0 ? 3 : 4;
  return (byte & (0x7f >> length)) | (length << 24);
}

/** The unfinished character after one more continuation byte. */
export function utf8Continue(partial: number, byte: number): number {
  return (((partial & UTF8_BITS) << 6) | (byte & 0x3f)) | (partial & ~UTF8_BITS);
}

/** The code point of a finished character, or -1 for an overlong form or a surrogate. */
export function utf8Finish(partial: number, byte: number): number {
  const codePoint = ((partial & UTF8_BITS) << 6) | (byte & 0x3f);
  if (codePoint < UTF8_MINIMUM[partial >>> 24]! || (codePoint >= 0xd800 && codePoint <= 0xdfff) || codePoint > 0x10ffff) return -1;
  return codePoint;
}

/** Positions and stack ids are packed into one number key: position + stack * POSITION_SPAN. */
const POSITION_SPAN = 2 ** 21;

/**
 * The pushdown automaton of a grammar, built lazily. A parse is a stack of grammar positions (the
 * top is always a character class, as in llama.cpp); stacks are interned as linked nodes
 * (position, rest) so that equal stacks are one id and pushing shares the rest. A parser state is
 * an interned, sorted set of stacks, and transitions between states are cached: ASCII in a dense
 * table per state, the rest in a map. Masking a vocabulary walks these cached transitions, so a
 * state seen before costs one array read per trie node.
 */
export class GrammarAutomaton {
  readonly grammar: Grammar;
  // The grammar flattened: each alternative is its symbols followed by END.
  private readonly kind: Uint8Array; // [positions]
  private readonly value: Int32Array; // [positions] class index or rule index
  private readonly alternatives: Int32Array[]; // [rules] start positions
  private readonly classes: CharacterClass[];
  private readonly asciiMatch: Uint8Array[]; // [classes][128]

  // Interned stacks: node 0 is the empty stack.
  private nodePosition = new Int32Array(1024);
  private nodeRest = new Int32Array(1024);
  private nodeCount = 1;
  private readonly nodeIndex = new Map<number, number>();
  private readonly expansions = new Map<number, Int32Array>();

  // Interned states (sets of stacks).
  private readonly stateStacks: Int32Array[] = [];
  private readonly stateIndex = new Map<string, number>();
  private readonly asciiTransitions: Int32Array[] = [];
  private readonly otherTransitions: Map<number, number>[] = [];
  private readonly accepting: boolean[] = [];
  /** Per state: next state by which of its stacks match (a bit mask), shared by all code points that match alike. */
  private readonly transitionsByMatch: Map<number, number>[] = [];
  /** Per state: whether a UTF-8 lead byte 0xC0 + i may begin a character that can follow (-1: not yet known). */
  private readonly leadBytes: Int8Array[] = [];
  private readonly partialFeasible: Map<number, boolean>[] = [];
  readonly initialState: number;

  constructor(grammar: Grammar) {
    this.grammar = grammar;
    let positions = 0;
    for (const alternatives of grammar.rules) for (const sequence of alternatives) positions += sequence.length + 1;
    if (positions >= POSITION_SPAN) throw new GrammarError(`the grammar has ${positions} positions, more than the ${POSITION_SPAN} supported`);
    this.kind = new Uint8Array(positions);
    this.value = new Int32Array(positions);
    this.classes = [];
    const classIndex = new Map<CharacterClass, number>();
    let at = 0;
    this.alternatives = grammar.rules.map((alternatives) =>
      Int32Array.from(alternatives, (sequence) => {
        const start = at;
        for (const symbol of sequence) {
          if (symbol.type === "rule") {
            this.kind[at] = RULE;
            this.value[at] = symbol.rule;
          } else {
            let index = classIndex.get(symbol.characters);
            if (index === undefined) {
              index = this.classes.length;
              this.classes.push(symbol.characters);
              classIndex.set(symbol.characters, index);
            }
            this.kind[at] = CHARACTERS;
            this.value[at] = index;
          }
          at++;
        }
        this.kind[at++] = END;
        return start;
      }),
    );
    this.asciiMatch = this.classes.map((characters) => Uint8Array.from({ length: 128 }, (_, code) => (classContains(characters, code) ? 1 : 0)));
    const stacks: number[] = [];
    for (const start of this.alternatives[grammar.root]!) stacks.push(...this.expand(start, EMPTY_STACK));
    this.initialState = this.internState(stacks);
  }

  /** Whether the state has matched a complete input (one of its stacks is empty). */
  isAccepting(state: number): boolean {
    return this.accepting[state]!;
  }

  /** Whether no character can follow: the only parse left is complete. */
  isFinished(state: number): boolean {
    const stacks = this.stateStacks[state]!;
    return stacks.length === 1 && stacks[0] === EMPTY_STACK;
  }

  /** The state after `codePoint`, or DEAD. */
  step(state: number, codePoint: number): number {
    if (codePoint < 128) {
      const table = this.asciiTable(state);
      let next = table[codePoint]!;
      if (next === UNKNOWN) {
        next = this.computeStep(state, codePoint);
        table[codePoint] = next;
      }
      return next;
    }
    let map = this.otherTransitions[state];
    if (!map) {
      map = new Map();
      this.otherTransitions[state] = map;
    }
    let next = map.get(codePoint);
    if (next === undefined) {
      next = this.computeStep(state, codePoint);
      map.set(codePoint, next);
    }
    return next;
  }

  /** The ASCII transitions of a state, filled as they are needed (UNKNOWN: not yet computed; see `step`). */
  asciiTable(state: number): Int32Array {
    let table = this.asciiTransitions[state];
    if (!table) {
      table = new Int32Array(128).fill(UNKNOWN);
      this.asciiTransitions[state] = table;
    }
    return table;
  }

  /** Whether a UTF-8 lead byte (0xC2…0xF4) begins a character that can follow. */
  leadByteAllowed(state: number, byte: number): boolean {
    let table = this.leadBytes[state];
    if (!table) {
      table = new Int8Array(64).fill(-1);
      this.leadBytes[state] = table;
    }
    let known = table[byte - 0xc0]!;
    if (known < 0) {
      const need = byte < 0xe0 ? 1 : byte < 0xf0 ? 2 : 3;
      known = this.partialAllowed(state, utf8Lead(byte), need) ? 1 : 0;
      table[byte - 0xc0] = known;
    }
    return known === 1;
  }

  /**
   * Whether an unfinished UTF-8 character (`partial` from utf8Lead/utf8Continue) still
   * `remaining` bytes short can become a code point that can follow. Overlong forms, surrogates
   * and values past U+10FFFF are excluded, so every output decodes as strict UTF-8.
   */
  partialAllowed(state: number, partial: number, remaining: number): boolean {
    let map = this.partialFeasible[state];
    if (!map) {
      map = new Map();
      this.partialFeasible[state] = map;
    }
    const key = partial * 4 + remaining;
    let known = map.get(key);
    if (known === undefined) {
      const bits = partial & UTF8_BITS;
      let low = Math.max(bits * 2 ** (6 * remaining), UTF8_MINIMUM[partial >>> 24]!);
      let high = Math.min((bits + 1) * 2 ** (6 * remaining) - 1, 0x10ffff);
      if (low >= 0xd800 && high <= 0xdfff) high = low - 1;
      else if (low >= 0xd800 && low <= 0xdfff) low = 0xe000;
      else if (high >= 0xd800 && high <= 0xdfff) high = 0xd7ff;
      known = low <= high && this.canContinueWithin(state, low, high);
      map.set(key, known);
    }
    return known;
  }

  /** Whether some code point in [low, high] can follow (a UTF-8 character seen in part). */
  canContinueWithin(state: number, low: number, high: number): boolean {
    for (const stack of this.stateStacks[state]!) {
      if (stack !== EMPTY_STACK && classIntersects(this.classes[this.value[this.nodePosition[stack]!]!]!, low, high)) return true;
    }
    return false;
  }

  /** Stacks of a state (for tests and diagnostics). */
  stackCount(state: number): number {
    return this.stateStacks[state]!.length;
  }

  private computeStep(state: number, codePoint: number): number {
    const stacks = this.stateStacks[state]!;
    const ascii = codePoint < 128;
    // Which stacks match, as a bit mask when there are few: code points that match the same stacks
    // lead to the same state, so the expansion is done once per mask, not once per code point.
    const masked = stacks.length <= 30;
    let bits = 0;
    const matched: number[] = [];
    for (let i = 0; i < stacks.length; i++) {
      const stack = stacks[i]!;
      if (stack === EMPTY_STACK) continue;
      const index = this.value[this.nodePosition[stack]!]!;
      if (ascii ? this.asciiMatch[index]![codePoint] === 0 : !classContains(this.classes[index]!, codePoint)) continue;
      bits |= masked ? 1 << i : 0;
      matched.push(stack);
    }
    if (matched.length === 0) return DEAD;
    let byMatch = this.transitionsByMatch[state];
    if (masked) {
      if (!byMatch) {
        byMatch = new Map();
        this.transitionsByMatch[state] = byMatch;
      }
      const known = byMatch.get(bits);
      if (known !== undefined) return known;
    }
    const next: number[] = [];
    for (const stack of matched) for (const expanded of this.expand(this.nodePosition[stack]! + 1, this.nodeRest[stack]!)) next.push(expanded);
    const result = this.internState(next);
    byMatch?.set(bits, result);
    return result;
  }

  private internState(stacks: number[]): number {
    const sorted = [...new Set(stacks)].sort((a, b) => a - b);
    if (sorted.length > MAX_STACKS_PER_STATE) {
      throw new GrammarError(`the grammar is too ambiguous: a state has ${sorted.length} parse stacks, more than ${MAX_STACKS_PER_STATE}`);
    }
    const key = sorted.join(",");
    let id = this.stateIndex.get(key);
    if (id === undefined) {
      id = this.stateStacks.length;
      this.stateStacks.push(Int32Array.from(sorted));
      this.accepting.push(sorted[0] === EMPTY_STACK);
      this.stateIndex.set(key, id);
    }
    return id;
  }

  private node(position: number, rest: number): number {
    const key = position + rest * POSITION_SPAN;
    let id = this.nodeIndex.get(key);
    if (id === undefined) {
      id = this.nodeCount++;
      if (id >= this.nodePosition.length) {
        const grownPosition = new Int32Array(this.nodePosition.length * 2);
        grownPosition.set(this.nodePosition);
        this.nodePosition = grownPosition;
        const grownRest = new Int32Array(this.nodeRest.length * 2);
        grownRest.set(this.nodeRest);
        this.nodeRest = grownRest;
      }
      this.nodePosition[id] = position;
      this.nodeRest[id] = rest;
      this.nodeIndex.set(key, id);
    }
    return id;
  }

  /**
   * The stacks whose top is a character class (or the empty stack) reached from `position` with
   * `rest` below it: rule references push their continuation (not when it is the end of the
   * alternative, so right recursion does not grow the stack) and expand every alternative; the end
   * of an alternative pops. Left recursion was rejected by validateGrammar, so this terminates.
   */
  private expand(position: number, rest: number): Int32Array {
    const key = position + rest * POSITION_SPAN;
    const cached = this.expansions.get(key);
    if (cached) return cached;
    let result: Int32Array;
    const kind = this.kind[position];
    if (kind === CHARACTERS) {
      result = Int32Array.of(this.node(position, rest));
    } else if (kind === END) {
      result = rest === EMPTY_STACK ? Int32Array.of(EMPTY_STACK) : this.expand(this.nodePosition[rest]!, this.nodeRest[rest]!);
    } else {
      const continuation = this.kind[position + 1] === END ? rest : this.node(position + 1, rest);
      const collected = new Set<number>();
      for (const start of this.alternatives[this.value[position]!]!) for (const stack of this.expand(start, continuation)) collected.add(stack);
      if (collected.size > MAX_STACKS_PER_STATE) throw new GrammarError(`the grammar is too ambiguous: rule "${this.grammar.ruleNames[this.value[position]!]}" expands to more than ${MAX_STACKS_PER_STATE} parse stacks`);
      result = Int32Array.from(collected);
    }
    this.expansions.set(key, result);
    return result;
  }
}

