import { type CharacterClass, type Grammar, type GrammarSymbol, normalizeRanges } from "./grammar";
import { GrammarSyntaxError } from "./grammar-error";
import { validateGrammar } from "./validate-grammar";

export interface ParseGbnfOptions {
  /** The start rule (default "root"). */
  readonly root?: string;
}

/**
 * Most symbols a grammar may expand to, repetitions included: `x{1000000}` would otherwise allocate
 * without bound before anything is sampled.
 */
export const MAX_GRAMMAR_SYMBOLS = 1_000_000;
/** Largest count allowed in `{m}`, `{m,}`, `{m,n}`. */
export const MAX_REPETITION = 100_000;

type Item = GrammarSymbol[];

/**
 * Parses a GBNF grammar (llama.cpp's format: `name ::= alternatives`, "literals" with \x \u \U
 * escapes, [classes] and [^negated] classes, `.`, groups, `* + ? {m} {m,} {m,n}`, `#` comments;
 * newlines end a rule except inside parentheses or after `|`). Repetitions become rules of their
 * own, as llama.cpp does. Errors say what and where (line:column); the result is then checked for
 * undefined rules and left recursion (`validateGrammar`).
 */
export function parseGbnf(text: string, options: ParseGbnfOptions = {}): Grammar {
  return new GbnfParser(text).parse(options.root ?? "root");
}

function isNameCharacter(code: number): boolean {
  return (code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a) || (code >= 0x30 && code <= 0x39) || code === 0x2d || code === 0x5f;
}

class GbnfParser {
  private position = 0;
  private readonly ruleNames: string[] = [];
  private readonly rules: (GrammarSymbol[][] | undefined)[] = [];
  private readonly ruleIndex = new Map<string, number>();
  /** Where each rule was first referenced, to report one that is never defined. */
  private readonly firstReference = new Map<number, number>();
  private readonly definedAt = new Map<number, number>();
  private symbolCount = 0;

  constructor(private readonly text: string) {}

  parse(rootName: string): Grammar {
    this.skipSpace(true);
    while (this.position < this.text.length) {
      this.parseRule();
      this.skipSpace(true);
    }
    for (const [rule, offset] of this.firstReference) {
      if (this.rules[rule] === undefined) this.fail(`undefined rule "${this.ruleNames[rule]}"`, offset);
    }
    const root = this.ruleIndex.get(rootName);
    if (root === undefined || this.rules[root] === undefined) this.fail(`the grammar has no "${rootName}" rule`, this.text.length);
    const grammar: Grammar = { ruleNames: this.ruleNames, rules: this.rules as GrammarSymbol[][][], root };
    validateGrammar(grammar);
    return grammar;
  }

  private fail(reason: string, offset = this.position): never {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < offset && i < this.text.length; i++) {
      if (this.text.charCodeAt(i) === 0x0a) {
        line++;
        lineStart = i + 1;
      }
    }
    throw new GrammarSyntaxError(line, offset - lineStart + 1, reason);
  }

  private peek(): number {
    return this.position < this.text.length ? this.text.charCodeAt(this.position) : -1;
  }

  /** Skips blanks and comments; newlines too when `newlineAllowed`. */
  private skipSpace(newlineAllowed: boolean): void {
    while (this.position < this.text.length) {
      const code = this.text.charCodeAt(this.position);
      if (code === 0x20 || code === 0x09 || (newlineAllowed && (code === 0x0a || code === 0x0d))) {
        this.position++;
      } else if (code === 0x23) {
        while (this.position < this.text.length && this.text.charCodeAt(this.position) !== 0x0a && this.text.charCodeAt(this.position) !== 0x0d) this.position++;
      } else {
        break;
      }
    }
  }

  private parseName(): string {
    const start = this.position;
    while (isNameCharacter(this.peek())) this.position++;
    if (this.position === start) this.fail(`expecting a rule name, found ${this.describeHere()}`);
    return this.text.slice(start, this.position);
  }

  private describeHere(): string {
    if (this.position >= this.text.length) return "the end of the grammar";
    const codePoint = this.text.codePointAt(this.position)!;
    return codePoint < 0x20 ? `\\x${codePoint.toString(16).padStart(2, "0")}` : `"${String.fromCodePoint(codePoint)}"`;
  }

  private ruleId(name: string): number {
    let id = this.ruleIndex.get(name);
    if (id === undefined) {
      id = this.newRule(name);
      this.ruleIndex.set(name, id);
    }
    return id;
  }

  private newRule(name: string): number {
    this.ruleNames.push(name);
    this.rules.push(undefined);
    return this.rules.length - 1;
  }

  private generatedRule(base: string, alternatives: GrammarSymbol[][]): number {
    const id = this.newRule(`${base}_${this.rules.length}`);
    this.rules[id] = alternatives;
    return id;
  }

  private parseRule(): void {
    const nameStart = this.position;
    const name = this.parseName();
    this.skipSpace(false);
    if (!this.text.startsWith("::=", this.position)) this.fail(`expecting "::=" after rule name "${name}", found ${this.describeHere()}`);
    this.position += 3;
    this.skipSpace(true);
    const id = this.ruleId(name);
    if (this.rules[id] !== undefined) this.fail(`rule "${name}" is defined twice (first at ${this.lineColumn(this.definedAt.get(id)!)})`, nameStart);
    this.definedAt.set(id, nameStart);
    this.rules[id] = this.parseAlternatives(name, false);
    this.skipSpace(false);
    const code = this.peek();
    if (code !== -1 && code !== 0x0a && code !== 0x0d) this.fail(`expecting a newline or the end of the grammar after rule "${name}", found ${this.describeHere()}`);
  }

  private lineColumn(offset: number): string {
    const before = this.text.slice(0, offset);
    const line = before.split("\n").length;
    return `${line}:${offset - before.lastIndexOf("\n")}`;
  }

  private parseAlternatives(ruleName: string, nested: boolean): GrammarSymbol[][] {
    const alternatives = [this.parseSequence(ruleName, nested)];
    while (this.peek() === 0x7c) {
      this.position++;
      this.skipSpace(true);
      alternatives.push(this.parseSequence(ruleName, nested));
    }
    return alternatives;
  }

  private count(symbols: number): void {
    this.symbolCount += symbols;
    if (this.symbolCount > MAX_GRAMMAR_SYMBOLS) this.fail(`the grammar expands to more than ${MAX_GRAMMAR_SYMBOLS} symbols`);
  }

  private parseSequence(ruleName: string, nested: boolean): GrammarSymbol[] {
    const items: Item[] = [];
    while (true) {
      const code = this.peek();
      const start = this.position;
      if (code === 0x22) {
        // "literal": one item, so that a repetition after it repeats the whole literal.
        this.position++;
        const item: Item = [];
        while (this.peek() !== 0x22) {
          if (this.position >= this.text.length || this.peek() === 0x0a) this.fail("unterminated literal (missing closing \")", start);
          const codePoint = this.parseCharacter();
          item.push({ type: "characters", characters: { ranges: [codePoint, codePoint], negated: false } });
        }
        this.position++;
        this.count(item.length);
        items.push(item);
      } else if (code === 0x5b) {
        items.push([{ type: "characters", characters: this.parseClass() }]);
        this.count(1);
      } else if (code === 0x2e) {
        this.position++;
        items.push([{ type: "characters", characters: { ranges: [], negated: true } }]);
        this.count(1);
      } else if (isNameCharacter(code)) {
        const name = this.parseName();
        const rule = this.ruleId(name);
        if (!this.firstReference.has(rule)) this.firstReference.set(rule, start);
        items.push([{ type: "rule", rule }]);
        this.count(1);
      } else if (code === 0x28) {
        this.position++;
        this.skipSpace(true);
        const alternatives = this.parseAlternatives(ruleName, true);
        if (this.peek() !== 0x29) this.fail(`expecting ")" to close the group opened at ${this.lineColumn(start)}, found ${this.describeHere()}`);
        this.position++;
        items.push([{ type: "rule", rule: this.generatedRule(ruleName, alternatives) }]);
        this.count(1);
      } else if (code === 0x2a || code === 0x2b || code === 0x3f || code === 0x7b) {
        const last = items.pop();
        if (!last) this.fail(`"${String.fromCharCode(code)}" has nothing before it to repeat`);
        this.position++;
        let minimum = 0;
        let maximum = Number.POSITIVE_INFINITY;
        if (code === 0x2b) minimum = 1;
        else if (code === 0x3f) maximum = 1;
        else if (code === 0x7b) [minimum, maximum] = this.parseBounds(start);
        items.push(this.repeat(ruleName, last, minimum, maximum));
      } else if (code === 0x3c) {
        this.fail("token references (<...>) are not supported");
      } else {
        break;
      }
      this.skipSpace(nested);
    }
    return items.flat();
  }

  private parseBounds(start: number): [number, number] {
    this.skipSpace(false);
    const minimum = this.parseInteger(start);
    this.skipSpace(false);
    let maximum = minimum;
    if (this.peek() === 0x2c) {
      this.position++;
      this.skipSpace(false);
      maximum = this.peek() === 0x7d ? Number.POSITIVE_INFINITY : this.parseInteger(start);
      this.skipSpace(false);
    }
    if (this.peek() !== 0x7d) this.fail(`expecting "}" to close the repetition, found ${this.describeHere()}`);
    this.position++;
    if (maximum < minimum) this.fail(`repetition {${minimum},${maximum}} has its maximum below its minimum`, start);
    return [minimum, maximum];
  }

  private parseInteger(start: number): number {
    const digitsStart = this.position;
    while (this.peek() >= 0x30 && this.peek() <= 0x39) this.position++;
    if (this.position === digitsStart) this.fail(`expecting a number in the repetition, found ${this.describeHere()}`);
    const value = Number(this.text.slice(digitsStart, this.position));
    if (value > MAX_REPETITION) this.fail(`repetition count ${value} is above the limit of ${MAX_REPETITION}`, start);
    return value;
  }

  /**
   * `item{minimum,maximum}`: the item `minimum` times, then `item*` as a right-recursive rule, or
   * `maximum - minimum` nested optional rules (`(x (x (x)?)?)?`), which keep the parse stacks few.
   */
  private repeat(ruleName: string, item: Item, minimum: number, maximum: number): Item {
    const extra = maximum === Number.POSITIVE_INFINITY ? 1 : maximum - minimum;
    this.count(item.length * (minimum + extra) + 2 * extra);
    let unit = item;
    if (item.length > 1 && minimum + extra > 1) unit = [{ type: "rule", rule: this.generatedRule(ruleName, [item]) }];
    const out: Item = [];
    for (let i = 0; i < minimum; i++) out.push(...unit);
    if (maximum === Number.POSITIVE_INFINITY) {
      const star = this.generatedRule(ruleName, []);
      this.rules[star] = [[...unit, { type: "rule", rule: star }], []];
      out.push({ type: "rule", rule: star });
    } else if (maximum > minimum) {
      let tail: number | undefined;
      for (let i = 0; i < maximum - minimum; i++) {
        const sequence: GrammarSymbol[] = tail === undefined ? [...unit] : [...unit, { type: "rule", rule: tail }];
        tail = this.generatedRule(ruleName, [sequence, []]);
      }
      out.push({ type: "rule", rule: tail! });
    }
    return out;
  }

  private parseClass(): CharacterClass {
    const start = this.position;
    this.position++;
    let negated = false;
    if (this.peek() === 0x5e) {
      negated = true;
      this.position++;
    }
    const pairs: number[] = [];
    while (this.peek() !== 0x5d) {
      if (this.position >= this.text.length || this.peek() === 0x0a) this.fail("unterminated character class (missing ])", start);
      const rangeStart = this.position;
      const low = this.parseCharacter();
      let high = low;
      const afterDash = this.text.charCodeAt(this.position + 1);
      if (this.peek() === 0x2d && this.position + 1 < this.text.length && afterDash !== 0x5d && afterDash !== 0x0a) {
        this.position++;
        high = this.parseCharacter();
        if (high < low) this.fail(`character range is reversed (U+${low.toString(16)} > U+${high.toString(16)})`, rangeStart);
      }
      pairs.push(low, high);
    }
    this.position++;
    return { ranges: normalizeRanges(pairs), negated };
  }

  /** One code point of a literal or class, escapes decoded. */
  private parseCharacter(): number {
    const codePoint = this.text.codePointAt(this.position)!;
    if (codePoint !== 0x5c) {
      this.position += codePoint > 0xffff ? 2 : 1;
      return codePoint;
    }
    const escapeStart = this.position;
    this.position++;
    const kind = this.text[this.position];
    this.position++;
    switch (kind) {
      case "x":
        return this.parseHex(2, escapeStart);
      case "u":
        return this.parseHex(4, escapeStart);
      case "U":
        return this.parseHex(8, escapeStart);
      case "t":
        return 0x09;
      case "r":
        return 0x0d;
      case "n":
        return 0x0a;
      case "\\":
      case '"':
      case "[":
      case "]":
      case "/":
      case "-":
      case "^":
        return kind.charCodeAt(0);
      default:
        return this.fail(kind === undefined ? "unterminated escape" : `unknown escape "\\${kind}"`, escapeStart);
    }
  }

  private parseHex(digits: number, escapeStart: number): number {
    const hex = this.text.slice(this.position, this.position + digits);
    if (hex.length !== digits || !/^[0-9a-fA-F]+$/.test(hex)) this.fail(`expecting ${digits} hex digits after "${this.text.slice(escapeStart, escapeStart + 2)}"`, escapeStart);
    this.position += digits;
    const value = Number.parseInt(hex, 16);
    if (value > 0x10ffff) this.fail(`U+${hex} is beyond the last Unicode code point`, escapeStart);
    return value;
  }
}
