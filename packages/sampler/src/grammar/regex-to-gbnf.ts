import { gbnfLiteral } from "./gbnf-text";
import { JsonSchemaError } from "./grammar-error";
import { MAX_REPETITION } from "./parse-gbnf";

/**
 * JSON schema `pattern`s as GBNF. A pattern is an ECMAScript regular expression matched, with the
 * `u` flag (as JSON schema validators such as ajv use it), against the decoded string; it matches
 * anywhere unless anchored by `^` and `$`. The grammar is for the string's JSON text between the
 * quotes: each character is written as JSON.stringify writes it (`"`, `\` and control characters
 * escaped, DEL as \u007f as the grammar's `char` rule asks), so that the output parses as JSON and
 * its value matches the pattern.
 *
 * Supported: literals and escapes (\t \n \r \v \f \0 \cX \xHH \uHHHH \u{H…}, escaped syntax
 * characters), `.`, \d \D \w \W \s \S, classes with ranges and negation, groups (capturing,
 * `(?:…)`, named), alternation, the quantifiers * + ? {n} {n,} {n,m} and their lazy forms, and
 * `^`/`$` at the ends of the pattern's alternatives. What a grammar cannot express (lookarounds,
 * backreferences, word boundaries) and Unicode property escapes are errors naming the pattern's
 * offset.
 */

/** Inclusive ranges of code points, sorted and disjoint. */
type CodeSet = readonly (readonly [number, number])[];

type RegexNode =
  | { readonly kind: "set"; readonly set: CodeSet }
  | { readonly kind: "sequence"; readonly items: readonly RegexNode[] }
  | { readonly kind: "alternation"; readonly options: readonly RegexNode[] }
  | { readonly kind: "repeat"; readonly item: RegexNode; readonly min: number; readonly max: number | undefined }
  | { readonly kind: "start" }
  | { readonly kind: "end" };

const LAST_CODE_POINT = 0x10ffff;
/** Every character a UTF-8 output can hold (no surrogates). */
const UNIVERSE: CodeSet = [
  [0, 0xd7ff],
  [0xe000, LAST_CODE_POINT],
];
const DIGITS: CodeSet = [[0x30, 0x39]];
const WORD: CodeSet = normalize([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
/** ECMAScript's WhiteSpace and LineTerminator characters (\s). */
const WHITESPACE: CodeSet = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
/** `.` without the s flag: anything but a line terminator. */
const DOT: CodeSet = complement(
  normalize([
    [0x0a, 0x0a],
    [0x0d, 0x0d],
    [0x2028, 0x2029],
  ]),
);
const SYNTAX_CHARACTERS = "^$\\.*+?()[]{}|/";

function normalize(ranges: readonly (readonly [number, number])[]): CodeSet {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [low, high] of sorted) {
    const last = out[out.length - 1];
    if (last && low <= last[1] + 1) last[1] = Math.max(last[1], high);
    else out.push([low, high]);
  }
  return out;
}

function union(...sets: CodeSet[]): CodeSet {
  return normalize(sets.flat());
}

function intersect(a: CodeSet, b: CodeSet): CodeSet {
  const out: [number, number][] = [];
  for (const [al, ah] of a) {
    for (const [bl, bh] of b) {
      const low = Math.max(al, bl);
      const high = Math.min(ah, bh);
      if (low <= high) out.push([low, high]);
    }
  }
  return normalize(out);
}

/** The characters of the universe not in the set. */
function complement(set: CodeSet): CodeSet {
  const out: [number, number][] = [];
  let next = 0;
  for (const [low, high] of set) {
    if (low > next) out.push([next, low - 1]);
    next = Math.max(next, high + 1);
  }
  if (next <= LAST_CODE_POINT) out.push([next, LAST_CODE_POINT]);
  return intersect(out, UNIVERSE);
}

class RegexParser {
  private position = 0;
  private readonly codes: number[];

  constructor(
    private readonly pattern: string,
    private readonly pointer: string,
  ) {
    this.codes = [...pattern].map((character) => character.codePointAt(0)!);
  }

  parse(): RegexNode {
    const node = this.alternation();
    if (this.position < this.codes.length) this.fail(this.peek() === 0x29 ? "unmatched )" : "unexpected character");
    return node;
  }

  private fail(reason: string, at = this.position): never {
    const offset = [...this.pattern].slice(0, at).join("").length;
    throw new JsonSchemaError(this.pointer, `pattern ${JSON.stringify(this.pattern)} at offset ${offset}: ${reason}`);
  }

  private peek(ahead = 0): number | undefined {
    return this.codes[this.position + ahead];
  }

  private eat(code: number): boolean {
    if (this.peek() !== code) return false;
    this.position++;
    return true;
  }

  private alternation(): RegexNode {
    const options = [this.sequence()];
    while (this.eat(0x7c /* | */)) options.push(this.sequence());
    return options.length === 1 ? options[0]! : { kind: "alternation", options };
  }

  private sequence(): RegexNode {
    const items: RegexNode[] = [];
    for (let code = this.peek(); code !== undefined && code !== 0x7c && code !== 0x29; code = this.peek()) items.push(this.term());
    return items.length === 1 ? items[0]! : { kind: "sequence", items };
  }

  private term(): RegexNode {
    const start = this.position;
    const atom = this.atom();
    const quantifier = this.quantifier();
    if (!quantifier) return atom;
    if (atom.kind === "start" || atom.kind === "end") this.fail("nothing to repeat", start);
    const [min, max] = quantifier;
    return { kind: "repeat", item: atom, min, max };
  }

  /** A quantifier after an atom, as [min, max] (max undefined: unbounded); lazy forms are the same language. */
  private quantifier(): [number, number | undefined] | undefined {
    const start = this.position;
    let result: [number, number | undefined] | undefined;
    if (this.eat(0x2a /* * */)) result = [0, undefined];
    else if (this.eat(0x2b /* + */)) result = [1, undefined];
    else if (this.eat(0x3f /* ? */)) result = [0, 1];
    else if (this.peek() === 0x7b /* { */) {
      this.position++;
      const min = this.decimal();
      if (min === undefined) this.fail("incomplete quantifier (a literal { must be escaped)", start);
      let max: number | undefined = min;
      if (this.eat(0x2c /* , */)) max = this.decimal();
      if (!this.eat(0x7d /* } */)) this.fail("incomplete quantifier (a literal { must be escaped)", start);
      if (max !== undefined && max < min) this.fail(`numbers out of order in {${min},${max}}`, start);
      if ((max ?? min) > MAX_REPETITION) this.fail(`repetition count above the supported ${MAX_REPETITION}`, start);
      result = [min, max];
    }
    if (result) {
      this.eat(0x3f); // lazy
      const next = this.peek();
      if (next === 0x2a || next === 0x2b || next === 0x3f || next === 0x7b) this.fail("nothing to repeat");
    }
    return result;
  }

  private decimal(): number | undefined {
    let digits = "";
    while (this.peek() !== undefined && this.peek()! >= 0x30 && this.peek()! <= 0x39) digits += String.fromCharCode(this.codes[this.position++]!);
    return digits === "" ? undefined : Number(digits);
  }

  private atom(): RegexNode {
    const start = this.position;
    const code = this.codes[this.position++]!;
    switch (code) {
      case 0x5e: // ^
        return { kind: "start" };
      case 0x24: // $
        return { kind: "end" };
      case 0x2e: // .
        return { kind: "set", set: DOT };
      case 0x28: // (
        return this.group(start);
      case 0x5b: // [
        return { kind: "set", set: this.characterClass() };
      case 0x5c: {
        // backslash
        const escaped = this.escape(false);
        return { kind: "set", set: typeof escaped === "number" ? [[escaped, escaped]] : escaped };
      }
      case 0x2a:
      case 0x2b:
      case 0x3f:
      case 0x7b:
        return this.fail("nothing to repeat", start);
      case 0x7d:
      case 0x5d:
        return this.fail(`lone ${String.fromCharCode(code)} (escape it)`, start);
      default:
        return { kind: "set", set: [[code, code]] };
    }
  }

  private group(start: number): RegexNode {
    if (this.eat(0x3f /* ? */)) {
      const kind = this.peek();
      if (kind === 0x3a /* : */) this.position++;
      else if (kind === 0x3d || kind === 0x21 || (kind === 0x3c && (this.peek(1) === 0x3d || this.peek(1) === 0x21))) {
        this.fail("lookahead and lookbehind assertions are not supported in a schema for constrained generation", start);
      } else if (kind === 0x3c /* < */) {
        this.position++;
        while (this.peek() !== undefined && this.peek() !== 0x3e) this.position++;
        if (!this.eat(0x3e)) this.fail("unterminated group name", start);
      } else this.fail("invalid group", start);
    }
    const inner = this.alternation();
    if (!this.eat(0x29 /* ) */)) this.fail("unterminated group", start);
    return inner;
  }

  /** After `[`: the class's characters (negation applied). */
  private characterClass(): CodeSet {
    const start = this.position - 1;
    const negated = this.eat(0x5e);
    const parts: CodeSet[] = [];
    while (true) {
      const code = this.peek();
      if (code === undefined) this.fail("unterminated character class", start);
      if (code === 0x5d) {
        this.position++;
        break;
      }
      const itemStart = this.position;
      const low = this.classAtom();
      if (this.peek() === 0x2d /* - */ && this.peek(1) !== undefined && this.peek(1) !== 0x5d) {
        this.position++;
        const high = this.classAtom();
        if (typeof low !== "number" || typeof high !== "number") this.fail("a class escape such as \\d cannot bound a range", itemStart);
        if (high < low) this.fail("range out of order in character class", itemStart);
        parts.push([[low, high]]);
      } else parts.push(typeof low === "number" ? [[low, low]] : low);
    }
    const set = intersect(union(...parts), UNIVERSE);
    return negated ? complement(set) : set;
  }

  private classAtom(): number | CodeSet {
    const code = this.codes[this.position++]!;
    return code === 0x5c ? this.escape(true) : code;
  }

  /** After a backslash: a code point, or a set for \d \w \s and their negations. */
  private escape(inClass: boolean): number | CodeSet {
    const start = this.position - 1;
    const code = this.codes[this.position++];
    if (code === undefined) this.fail("\\ at end of pattern", start);
    const character = String.fromCodePoint(code);
    switch (character) {
      case "d":
        return DIGITS;
      case "D":
        return complement(DIGITS);
      case "w":
        return WORD;
      case "W":
        return complement(WORD);
      case "s":
        return WHITESPACE;
      case "S":
        return complement(WHITESPACE);
      case "t":
        return 0x09;
      case "n":
        return 0x0a;
      case "v":
        return 0x0b;
      case "f":
        return 0x0c;
      case "r":
        return 0x0d;
      case "b":
        if (inClass) return 0x08;
        return this.fail("word boundaries (\\b) are not supported in a schema for constrained generation", start);
      case "B":
        return this.fail("word boundaries (\\B) are not supported in a schema for constrained generation", start);
      case "0":
        if (this.peek() !== undefined && this.peek()! >= 0x30 && this.peek()! <= 0x39) this.fail("octal escapes are not allowed with the u flag", start);
        return 0;
      case "c": {
        const letter = this.peek();
        if (letter === undefined || !((letter >= 0x41 && letter <= 0x5a) || (letter >= 0x61 && letter <= 0x7a))) this.fail("\\c must be followed by a letter", start);
        this.position++;
        return letter % 32;
      }
      case "x":
        return this.hex(2, start);
      case "u":
        return this.unicodeEscape(start);
      case "p":
      case "P":
        return this.fail("Unicode property escapes (\\p{…}) are not supported in a schema for constrained generation", start);
      case "k":
        return this.fail("backreferences are not supported in a schema for constrained generation", start);
      default:
        if (code >= 0x31 && code <= 0x39) this.fail("backreferences are not supported in a schema for constrained generation", start);
        if (SYNTAX_CHARACTERS.includes(character) || (inClass && character === "-")) return code;
        return this.fail(`invalid escape \\${character} (with the u flag only syntax characters may be escaped)`, start);
    }
  }

  private hex(digits: number, start: number): number {
    let text = "";
    for (let i = 0; i < digits; i++) {
      const code = this.peek();
      if (code === undefined || !/[0-9a-fA-F]/.test(String.fromCharCode(code))) this.fail(`expecting ${digits} hex digits`, start);
      text += String.fromCharCode(code);
      this.position++;
    }
    return Number.parseInt(text, 16);
  }

  private unicodeEscape(start: number): number {
    if (this.eat(0x7b /* { */)) {
      let text = "";
      while (this.peek() !== undefined && this.peek() !== 0x7d) text += String.fromCodePoint(this.codes[this.position++]!);
      if (!this.eat(0x7d) || !/^[0-9a-fA-F]+$/.test(text)) this.fail("invalid \\u{…} escape", start);
      const value = Number.parseInt(text, 16);
      if (value > LAST_CODE_POINT) this.fail("\\u{…} beyond the last Unicode code point", start);
      return value;
    }
    const value = this.hex(4, start);
    // A surrogate pair written as two escapes is one character with the u flag.
    if (value >= 0xd800 && value <= 0xdbff && this.peek() === 0x5c && this.peek(1) === 0x75) {
      const saved = this.position;
      this.position += 2;
      if (this.codes.slice(this.position, this.position + 4).every((c) => /[0-9a-fA-F]/.test(String.fromCharCode(c))) && this.position + 4 <= this.codes.length) {
        const low = this.hex(4, start);
        if (low >= 0xdc00 && low <= 0xdfff) return 0x10000 + ((value - 0xd800) << 10) + (low - 0xdc00);
      }
      this.position = saved;
    }
    return value;
  }
}

function nullable(node: RegexNode): boolean {
  switch (node.kind) {
    case "set":
      return false;
    case "sequence":
      return node.items.every(nullable);
    case "alternation":
      return node.options.some(nullable);
    case "repeat":
      return node.min === 0 || nullable(node.item);
    default:
      return true;
  }
}

/** A node for the node's non-empty matches (undefined when it matches only the empty string). */
function nonEmpty(node: RegexNode): RegexNode | undefined {
  switch (node.kind) {
    case "set":
      return node;
    case "start":
    case "end":
      return undefined;
    case "alternation": {
      const options = node.options.map(nonEmpty).filter((option) => option !== undefined);
      return options.length === 0 ? undefined : options.length === 1 ? options[0] : { kind: "alternation", options };
    }
    case "repeat": {
      if (node.max === 0) return undefined;
      const item = nullable(node.item) ? nonEmpty(node.item) : node.item;
      if (!item) return undefined;
      return { kind: "repeat", item, min: Math.max(1, nullable(node.item) ? 1 : node.min), max: node.max };
    }
    case "sequence": {
      // (a b…) minus ε = (a minus ε) b… | (if a can be empty) (b… minus ε)
      const [first, ...rest] = node.items;
      if (!first) return undefined;
      const tail: RegexNode = { kind: "sequence", items: rest };
      const options: RegexNode[] = [];
      const head = nonEmpty(first);
      if (head) options.push({ kind: "sequence", items: [head, ...rest] });
      if (nullable(first)) {
        const other = nonEmpty(tail);
        if (other) options.push(other);
      }
      return options.length === 0 ? undefined : options.length === 1 ? options[0] : { kind: "alternation", options };
    }
  }
}

/** The canonical JSON string text of one character (as JSON.stringify writes it; DEL escaped). */
function jsonText(code: number): string {
  switch (code) {
    case 0x22:
      return '\\"';
    case 0x5c:
      return "\\\\";
    case 0x08:
      return "\\b";
    case 0x0c:
      return "\\f";
    case 0x0a:
      return "\\n";
    case 0x0d:
      return "\\r";
    case 0x09:
      return "\\t";
    default:
      if (code < 0x20 || code === 0x7f) return `\\u${code.toString(16).padStart(4, "0")}`;
      return String.fromCodePoint(code);
  }
}

/** Characters written as themselves in JSON text (everything but `"`, `\`, controls and DEL). */
const RAW: CodeSet = normalize([
  [0x20, 0x21],
  [0x23, 0x5b],
  [0x5d, 0x7e],
  [0x80, 0xd7ff],
  [0xe000, LAST_CODE_POINT],
]);

function classCharacter(code: number): string {
  if (code >= 0x30 && code <= 0x39) return String.fromCharCode(code);
  if ((code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a)) return String.fromCharCode(code);
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\U${code.toString(16).padStart(8, "0")}`;
}

/** Defines a rule from a name hint and its body, returning the rule's name. */
export type DefineRule = (hint: string, body: string) => string;

class RegexEmitter {
  private readonly setRules = new Map<string, string>();

  constructor(private readonly define: DefineRule) {}

  /** An expression for the node, in parentheses when it has several parts. */
  emit(node: RegexNode): string {
    switch (node.kind) {
      case "set":
        return this.set(node.set);
      case "sequence":
        return node.items.length === 0 ? '""' : `( ${node.items.map((item) => this.emit(item)).join(" ")} )`;
      case "alternation":
        return `( ${node.options.map((option) => this.emit(option)).join(" | ")} )`;
      case "repeat": {
        let { item, min } = node;
        const { max } = node;
        if (max === 0) return '""';
        if (nullable(item)) {
          // A repetition of something that can be empty: repeat its non-empty matches, any number of times down to 0.
          const inner = nonEmpty(item);
          if (!inner) return '""';
          item = inner;
          min = 0;
        }
        const body = this.emit(item);
        if (min === 0 && max === undefined) return `${body}*`;
        if (min === 1 && max === undefined) return `${body}+`;
        if (min === 0 && max === 1) return `${body}?`;
        if (max === undefined) return `${body}{${min},}`;
        return min === max ? `${body}{${min}}` : `${body}{${min},${max}}`;
      }
      default:
        throw new Error("anchors are removed before emitting");
    }
  }

  /** The JSON text of any character of the set: raw characters as a class, the rest as escapes. */
  private set(set: CodeSet): string {
    const key = set.map(([low, high]) => `${low}-${high}`).join(",");
    const known = this.setRules.get(key);
    if (known) return known;
    const parts: string[] = [];
    const raw = intersect(set, RAW);
    if (raw.length > 0) parts.push(`[${raw.map(([low, high]) => (low === high ? classCharacter(low) : `${classCharacter(low)}-${classCharacter(high)}`)).join("")}]`);
    for (const [low, high] of set) {
      for (let code = low; code <= Math.min(high, 0x7f); code++) {
        if (code < 0x20 || code === 0x22 || code === 0x5c || code === 0x7f) parts.push(gbnfLiteral(jsonText(code)));
      }
    }
    if (parts.length === 0) return '[^\\x00-\\U0010ffff]'; // matches nothing, as an empty class does
    const expression = parts.length === 1 ? parts[0]! : this.define("pattern-char", parts.join(" | "));
    this.setRules.set(key, expression);
    return expression;
  }
}

/** One of a pattern's top-level alternatives with its anchors taken off. */
interface AnchoredOption {
  readonly items: readonly RegexNode[];
  readonly anchoredStart: boolean;
  readonly anchoredEnd: boolean;
}

/** The pattern's top-level alternatives; `^` and `$` anywhere else are errors at `pointer`. */
function anchoredOptions(pattern: string, pointer: string): AnchoredOption[] {
  const root = new RegexParser(pattern, pointer).parse();
  const options = root.kind === "alternation" ? root.options : [root];
  return options.map((option) => {
    const items = option.kind === "sequence" ? [...option.items] : [option];
    let anchoredStart = false;
    let anchoredEnd = false;
    while (items[0]?.kind === "start") {
      items.shift();
      anchoredStart = true;
    }
    while (items[items.length - 1]?.kind === "end") {
      items.pop();
      anchoredEnd = true;
    }
    const misplaced = (node: RegexNode): boolean =>
      node.kind === "start" || node.kind === "end" || (node.kind === "sequence" && node.items.some(misplaced)) || (node.kind === "alternation" && node.options.some(misplaced)) || (node.kind === "repeat" && misplaced(node.item));
    if (items.some(misplaced)) throw new JsonSchemaError(pointer, `pattern ${JSON.stringify(pattern)}: ^ and $ are supported only at the start and end of the pattern (or of its top-level alternatives)`);
    return { items, anchoredStart, anchoredEnd };
  });
}

/**
 * GBNF for the JSON text between the quotes of a string that `pattern` matches (see the file's
 * comment). `define` adds helper rules; `anyCharacter` names the rule of any JSON string character,
 * used where the pattern is not anchored. Errors are JsonSchemaErrors at `pointer`.
 */
export function patternToGbnf(pattern: string, pointer: string, define: DefineRule, anyCharacter: string): string {
  const emitter = new RegexEmitter(define);
  const alternatives = anchoredOptions(pattern, pointer).map(({ items, anchoredStart, anchoredEnd }) => {
    const parts = items.map((item) => emitter.emit(item));
    if (!anchoredStart) parts.unshift(`${anyCharacter}*`);
    if (!anchoredEnd && (anchoredStart || parts.length > 1)) parts.push(`${anyCharacter}*`);
    return parts.length === 0 ? '""' : parts.join(" ");
  });
  return alternatives.length === 1 ? alternatives[0]! : `( ${alternatives.join(" | ")} )`;
}

/** Fewest and most characters a node matches (most undefined: unbounded). */
function lengthRange(node: RegexNode): [number, number | undefined] {
  switch (node.kind) {
    case "set":
      return [1, 1];
    case "start":
    case "end":
      return [0, 0];
    case "sequence": {
      let low = 0;
      let high: number | undefined = 0;
      for (const item of node.items) {
        const [itemLow, itemHigh] = lengthRange(item);
        low += itemLow;
        high = high === undefined || itemHigh === undefined ? undefined : high + itemHigh;
      }
      return [low, high];
    }
    case "alternation": {
      const ranges = node.options.map(lengthRange);
      return [Math.min(...ranges.map(([low]) => low)), ranges.some(([, high]) => high === undefined) ? undefined : Math.max(...ranges.map(([, high]) => high!))];
    }
    case "repeat": {
      if (node.max === 0) return [0, 0];
      const [itemLow, itemHigh] = lengthRange(node.item);
      return [itemLow * node.min, itemHigh === 0 ? 0 : itemHigh === undefined || node.max === undefined ? undefined : itemHigh * node.max];
    }
  }
}

/** Most positions (character sets in the pattern, counted repetitions written out) a length-bounded pattern may have. */
export const MAX_BOUNDED_PATTERN_POSITIONS = 20_000;
/** Most rules (position × characters so far) the grammar of a length-bounded pattern may have. */
export const MAX_BOUNDED_PATTERN_RULES = 50_000;

/** Glushkov's automaton of a pattern's part: whether it matches the empty string, the positions that can begin and end a match. */
interface Fragment {
  readonly nullable: boolean;
  readonly first: readonly number[];
  readonly last: readonly number[];
}

/**
 * The position automaton (Glushkov) of a regular expression: one state per character set in it,
 * counted repetitions written out, no ε-transitions; a match is a walk start → first → follow … ending at a last position.
 */
class PositionAutomaton {
  readonly sets: CodeSet[] = [];
  readonly follow: Set<number>[] = [];

  constructor(private readonly tooLarge: () => never) {}

  build(node: RegexNode): Fragment {
    switch (node.kind) {
      case "set": {
        if (this.sets.length >= MAX_BOUNDED_PATTERN_POSITIONS) this.tooLarge();
        const position = this.sets.length;
        this.sets.push(node.set);
        this.follow.push(new Set());
        return { nullable: false, first: [position], last: [position] };
      }
      case "sequence":
        return node.items.reduce<Fragment>((sequence, item) => this.sequence(sequence, this.build(item)), { nullable: true, first: [], last: [] });
      case "alternation": {
        const options = node.options.map((option) => this.build(option));
        return { nullable: options.some((option) => option.nullable), first: options.flatMap((option) => option.first), last: options.flatMap((option) => option.last) };
      }
      case "repeat": {
        const { item, min, max } = node;
        let fragment: Fragment = { nullable: true, first: [], last: [] };
        for (let i = 0; i < min; i++) fragment = this.sequence(fragment, this.build(item));
        if (max === undefined) return this.sequence(fragment, this.star(this.build(item)));
        // x{0,k} as (x (x (…)?)?)?: each optional copy follows only the copy before it.
        let optional: Fragment | undefined;
        for (let i = min; i < max; i++) {
          const copy = this.build(item);
          optional = { ...(optional ? this.sequence(copy, optional) : copy), nullable: true };
        }
        return optional ? this.sequence(fragment, optional) : fragment;
      }
      default:
        throw new Error("anchors are removed before building the automaton");
    }
  }

  private sequence(a: Fragment, b: Fragment): Fragment {
    for (const position of a.last) for (const next of b.first) this.follow[position]!.add(next);
    return { nullable: a.nullable && b.nullable, first: a.nullable ? [...a.first, ...b.first] : a.first, last: b.nullable ? [...a.last, ...b.last] : b.last };
  }

  private star(a: Fragment): Fragment {
    for (const position of a.last) for (const next of a.first) this.follow[position]!.add(next);
    return { nullable: true, first: a.first, last: a.last };
  }
}

/** Rule names that are reserved as they are made, and bodies set later (rules may refer to rules not yet written). */
export interface RuleWriter {
  /** A new rule name from a hint; no later name equals it. */
  name(hint: string): string;
  set(name: string, body: string): void;
}

/** Which string's length bounds a bounded pattern takes: the JSON schema keywords. */
export interface LengthBounds {
  readonly minimum: number;
  readonly maximum: number | undefined;
}

/**
 * GBNF for the JSON text between the quotes of a string that `pattern` matches and whose length
 * in characters (code points, as JSON schema counts them) is within `length`: JSON schema's
 * `pattern` (or a format) together with `minLength`/`maxLength`. Where the pattern's own lengths
 * lie within the bounds, it is `patternToGbnf`'s grammar. Otherwise the grammar is the product of
 * the pattern's position automaton with a count of the characters so far (up to the maximum, or
 * to the minimum when there is none): one rule per pair a match can reach and finish from, each
 * rule a character set followed by the next pair's rule. Pattern errors are at `patternPointer`;
 * bounds no matching string meets, and products beyond MAX_BOUNDED_PATTERN_RULES, at `pointer`
 * (the string schema's) or its `/minLength` or `/maxLength`.
 */
export function boundedPatternToGbnf(pattern: string, patternPointer: string, pointer: string, rules: RuleWriter, anyCharacter: string, length: LengthBounds): string {
  const define: DefineRule = (hint, body) => {
    const name = rules.name(hint);
    rules.set(name, body);
    return name;
  };
  const options = anchoredOptions(pattern, patternPointer);
  const any: RegexNode = { kind: "repeat", item: { kind: "set", set: UNIVERSE }, min: 0, max: undefined };
  const root: RegexNode = {
    kind: "alternation",
    options: options.map(({ items, anchoredStart, anchoredEnd }) => ({ kind: "sequence", items: [...(anchoredStart ? [] : [any]), ...items, ...(anchoredEnd ? [] : [any])] })),
  };
  const [shortest, longest] = lengthRange(root);
  const minimum = length.minimum > shortest ? length.minimum : 0;
  const maximum = length.maximum !== undefined && (longest === undefined || longest > length.maximum) ? length.maximum : undefined;
  const bounds = `${length.minimum}${length.maximum === undefined ? " or more" : length.maximum === length.minimum ? "" : ` to ${length.maximum}`}`;
  if (minimum === 0 && maximum === undefined) return patternToGbnf(pattern, patternPointer, define, anyCharacter);

  const tooLarge = (): never => {
    throw new JsonSchemaError(`${pointer}/${maximum !== undefined ? "maxLength" : "minLength"}`, `pattern ${JSON.stringify(pattern)} with a length of ${bounds} characters needs a grammar of more than ${MAX_BOUNDED_PATTERN_RULES} rules (at most ${MAX_BOUNDED_PATTERN_POSITIONS} positions); lower maxLength or minLength, or simplify the pattern`);
  };
  const automaton = new PositionAutomaton(tooLarge);
  const fragment = automaton.build(root);
  const last = new Uint8Array(automaton.sets.length);
  for (const position of fragment.last) last[position] = 1;

  // Pairs (position, characters so far), position -1 being the start; counts stop at the
  // maximum, or stay at the minimum once reached when there is no maximum.
  const countSpan = (maximum ?? minimum) + 1;
  const pairPosition: number[] = [-1];
  const pairCount: number[] = [0];
  const pairIndex = new Map<number, number>([[0, 0]]);
  const successors: number[][] = [];
  for (let pair = 0; pair < pairPosition.length; pair++) {
    const position = pairPosition[pair]!;
    const count = pairCount[pair]!;
    const next: number[] = [];
    if (maximum === undefined || count < maximum) {
      const nextCount = maximum === undefined ? Math.min(count + 1, minimum) : count + 1;
      for (const nextPosition of position < 0 ? fragment.first : automaton.follow[position]!) {
        if (automaton.sets[nextPosition]!.length === 0) continue; // a set that matches nothing
        const key = (nextPosition + 1) * countSpan + nextCount;
        let index = pairIndex.get(key);
        if (index === undefined) {
          if (pairPosition.length >= MAX_BOUNDED_PATTERN_RULES) tooLarge();
          index = pairPosition.length;
          pairIndex.set(key, index);
          pairPosition.push(nextPosition);
          pairCount.push(nextCount);
        }
        next.push(index);
      }
    }
    successors.push(next);
  }
  const accepting = (pair: number) => pairCount[pair]! >= minimum && (pairPosition[pair]! < 0 ? fragment.nullable : last[pairPosition[pair]!] === 1);

  // Only pairs from which a match can still finish get rules: a rule with no way out would leave
  // the sampler with no token to pick.
  const predecessors: number[][] = pairPosition.map(() => []);
  successors.forEach((next, pair) => {
    for (const successor of next) predecessors[successor]!.push(pair);
  });
  const live = new Uint8Array(pairPosition.length);
  const queue: number[] = [];
  for (let pair = 0; pair < pairPosition.length; pair++) {
    if (accepting(pair)) {
      live[pair] = 1;
      queue.push(pair);
    }
  }
  while (queue.length > 0) {
    for (const predecessor of predecessors[queue.pop()!]!) {
      if (!live[predecessor]) {
        live[predecessor] = 1;
        queue.push(predecessor);
      }
    }
  }
  const conflicting = length.maximum !== undefined && length.maximum < shortest ? "/maxLength" : longest !== undefined && length.minimum > longest ? "/minLength" : "";
  if (!live[0]) throw new JsonSchemaError(`${pointer}${conflicting}`, `no string of ${bounds} characters matches pattern ${JSON.stringify(pattern)}`);

  const emitter = new RegexEmitter(define);
  const base = rules.name("pattern-length");
  const names = new Map<number, string>([[0, base]]);
  const nameOf = (pair: number) => {
    let name = names.get(pair);
    if (name === undefined) {
      name = rules.name(`${base}-${names.size}`);
      names.set(pair, name);
    }
    return name;
  };
  const pending = [0];
  const written = new Uint8Array(pairPosition.length);
  written[0] = 1;
  while (pending.length > 0) {
    const pair = pending.pop()!;
    const alternatives: string[] = [];
    for (const successor of successors[pair]!) {
      if (!live[successor]) continue;
      alternatives.push(`${emitter.emit({ kind: "set", set: automaton.sets[pairPosition[successor]!]! })} ${nameOf(successor)}`);
      if (!written[successor]) {
        written[successor] = 1;
        pending.push(successor);
      }
    }
    if (accepting(pair)) alternatives.push('""');
    rules.set(nameOf(pair), alternatives.join(" | "));
  }
  return base;
}
