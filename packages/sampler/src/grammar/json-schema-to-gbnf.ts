import { JsonSchemaError } from "./grammar-error";
import type { Grammar } from "./grammar";
import { gbnfLiteral } from "./gbnf-text";
import { integerRangeGbnf } from "./integer-range";
import { MAX_NUMBER_DIGITS, numberRangeGbnf, plainDecimal, significantDigits } from "./number-range";
import { MAX_REPETITION, parseGbnf } from "./parse-gbnf";
import { boundedPatternToGbnf } from "./regex-to-gbnf";
import { STRING_FORMATS } from "./string-formats";

export { gbnfLiteral } from "./gbnf-text";

const SAFE_BOUND = Number.MAX_SAFE_INTEGER;

/**
 * Shared rules, as llama.cpp's json-schema-to-grammar writes them. Whitespace is bounded (one
 * space, or a newline and up to 20 indentation characters) so that a model cannot pad forever;
 * numbers have at most 16 digits per part for the same reason.
 */
const PRIMITIVES: Record<string, string> = {
  space: '| " " | "\\n" [ \\t]{0,20}',
  boolean: '("true" | "false") space',
  null: '"null" space',
  char: '[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
  string: '"\\"" char* "\\"" space',
  "integral-part": "[0] | [1-9] [0-9]{0,15}",
  "decimal-part": "[0-9]{1,16}",
  number: '("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space',
  value: "object | array | string | number | boolean | null",
  object: '"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space',
  array: '"[" space ( value ("," space value)* )? "]" space',
};
const PRIMITIVE_DEPENDENCIES: Record<string, string[]> = {
  boolean: ["space"],
  null: ["space"],
  string: ["char", "space"],
  number: ["integral-part", "decimal-part", "space"],
  value: ["object", "array", "string", "number", "boolean", "null"],
  object: ["string", "value", "space"],
  array: ["value", "space"],
};

/** Keywords whose constraint a grammar cannot enforce here: rejected rather than silently ignored. */
const UNSUPPORTED_KEYWORDS = ["not", "if", "then", "else", "uniqueItems", "contains", "patternProperties", "multipleOf", "minProperties", "maxProperties", "dependentSchemas", "dependentRequired", "propertyNames"];
const KNOWN_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"];

type Schema = Record<string, unknown> | boolean;

function escapePointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

/**
 * GBNF for the JSON values a schema allows: objects (properties in declaration order, required
 * first then any subset of the optional ones; no other keys unless the object declares no
 * properties), arrays (items, prefixItems, minItems/maxItems), strings (minLength/maxLength, a
 * `pattern` or one of the formats of `STRING_FORMATS`, and both together), enum, const, integers (any minimum and
 * maximum; JavaScript's safe integers), numbers (any minimum, maximum and exclusive bounds;
 * bounded ones in decimal notation of at most 15 digits), booleans, null, `anyOf`/`oneOf`, `type` lists,
 * and `$ref` into `$defs`/`definitions` (recursion allowed). What it cannot enforce (`uniqueItems`,
 * `multipleOf`, a pattern with a lookahead, ...) is an error naming the JSON pointer, so that an
 * output never silently fails validation. The exception is a `format` it does not know (`uri`,
 * ...): JSON schema 2020-12 makes formats annotations, and as llama.cpp it then allows any string.
 * A `pattern` is enforced instead of a `format` given with it (zod writes both, the pattern being
 * its check of the format).
 */
export function jsonSchemaToGbnf(schema: unknown): string {
  return new SchemaConverter(schema).convert();
}

/** A function a model may call: its name and the JSON schema of its arguments (any object when absent). */
export interface ToolCallFunction {
  readonly name: string;
  readonly parameters?: unknown;
}

export interface ToolCallGrammarOptions {
  /** Several calls, one after another (OpenAI's parallel_tool_calls). Default true. */
  readonly parallel?: boolean;
  readonly openTag?: string;
  readonly closeTag?: string;
}

/**
 * GBNF for an answer that is nothing but tool calls in Qwen3's (Hermes 2 Pro's) format:
 * `<tool_call>\n{"name": "<one of the names>", "arguments": <value of its parameters schema>}\n</tool_call>`,
 * one or (parallel) several separated by newlines, as llama.cpp constrains a required tool choice.
 * A parameters schema this converter cannot enforce is a JsonSchemaError whose pointer starts at
 * the tool (`/tools/1/function/parameters/...`).
 */
export function toolCallGbnf(functions: readonly ToolCallFunction[], options: ToolCallGrammarOptions = {}): string {
  if (functions.length === 0) throw new JsonSchemaError("/tools", "a tool-call grammar needs at least one function");
  const rules = new Map<string, string>();
  const calls: string[] = [];
  functions.forEach((fn, i) => {
    const converter = new SchemaConverter(fn.parameters ?? { type: "object" }, `tool${i}-`, `tool${i}-arguments`);
    try {
      converter.convertRules();
    } catch (error) {
      if (error instanceof JsonSchemaError) throw new JsonSchemaError(`/tools/${i}/function/parameters${error.pointer}`, error.reason);
      throw error;
    }
    for (const [name, rule] of converter.rules) rules.set(name, rule);
    const call = `tool${i}-call`;
    // The name part exactly as Qwen3's template writes it; the arguments with JSON's own spacing.
    rules.set(call, `${gbnfLiteral(`{"name": ${JSON.stringify(fn.name)}, "arguments": `)} tool${i}-arguments "}"`);
    calls.push(call);
  });
  rules.set("space", PRIMITIVES.space!);
  const block = `${gbnfLiteral(`${options.openTag ?? "<tool_call>"}\n`)} ( ${calls.join(" | ")} ) ${gbnfLiteral(`\n${options.closeTag ?? "</tool_call>"}`)}`;
  rules.set("tool-call-block", block);
  const root = options.parallel === false ? "tool-call-block" : `tool-call-block ( "\\n" tool-call-block )*`;
  const lines = [`root ::= ${root}`, ...[...rules].map(([name, rule]) => `${name} ::= ${rule}`)];
  return `${lines.join("\n")}\n`;
}

/** `jsonSchemaToGbnf` parsed into a grammar. */
export function grammarFromJsonSchema(schema: unknown): Grammar {
  return parseGbnf(jsonSchemaToGbnf(schema));
}

class SchemaConverter {
  readonly rules = new Map<string, string>();
  private readonly references = new Map<string, string>();

  /**
   * `prefix` starts every rule name but the shared primitives' (whose text is the same in every
   * converter), and `rootName` names the root rule, so that several schemas' rules can share a grammar.
   */
  constructor(
    private readonly root: unknown,
    private readonly prefix = "",
    private readonly rootName = "root",
  ) {}

  convert(): string {
    this.convertRules();
    const lines = [...this.rules].map(([name, rule]) => `${name} ::= ${rule}`);
    return `${lines.join("\n")}\n`;
  }

  /** Fills `rules`, the root's under `rootName`. */
  convertRules(): void {
    const body = this.visit(this.root, "", this.rootName);
    this.rules.set(this.rootName, body);
  }

  private fail(pointer: string, reason: string): never {
    throw new JsonSchemaError(pointer, reason);
  }

  private primitive(name: string): string {
    if (!this.rules.has(name)) {
      this.rules.set(name, PRIMITIVES[name]!);
      for (const dependency of PRIMITIVE_DEPENDENCIES[name] ?? []) this.primitive(dependency);
    }
    return name;
  }

  /** A fresh rule name from a hint (property path), characters GBNF does not allow replaced. */
  private ruleName(hint: string): string {
    const base = this.prefix + (hint.replace(/[^a-zA-Z0-9-]+/g, "-").replace(/^-+|-+$/g, "") || "rule");
    let name = base;
    for (let i = 1; this.rules.has(name) || PRIMITIVES[name] !== undefined || name === this.rootName || name === "root"; i++) name = `${base}-${i}`;
    this.rules.set(name, ""); // reserved; filled by the caller
    return name;
  }

  /** A rule for the subschema, for use where a single symbol is needed. */
  private ruleFor(schema: unknown, pointer: string, hint: string): string {
    const body = this.visit(schema, pointer, hint);
    if (/^[a-zA-Z0-9-]+$/.test(body)) return body;
    const name = this.ruleName(hint);
    this.rules.set(name, body);
    return name;
  }

  /** The right-hand side of a rule matching the schema (followed by optional space). */
  private visit(schema: unknown, pointer: string, hint: string): string {
    if (schema === true) return this.primitive("value");
    if (schema === false) this.fail(pointer, "the schema `false` allows no value");
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) this.fail(pointer, `a schema must be an object or a boolean, got ${Array.isArray(schema) ? "an array" : JSON.stringify(schema)}`);
    const node = schema as Record<string, unknown>;
    for (const keyword of UNSUPPORTED_KEYWORDS) {
      if (node[keyword] !== undefined) this.fail(`${pointer}/${keyword}`, `"${keyword}" is not supported in a schema for constrained generation`);
    }

    if (node.$ref !== undefined) return this.reference(node.$ref, `${pointer}/$ref`);
    if (node.const !== undefined) return `${gbnfLiteral(JSON.stringify(node.const))} ${this.primitive("space")}`;
    if (node.enum !== undefined) {
      if (!Array.isArray(node.enum) || node.enum.length === 0) this.fail(`${pointer}/enum`, "enum must be a non-empty array");
      this.primitive("space");
      return `(${node.enum.map((value) => gbnfLiteral(JSON.stringify(value))).join(" | ")}) space`;
    }
    for (const keyword of ["anyOf", "oneOf"] as const) {
      const options = node[keyword];
      if (options === undefined) continue;
      if (!Array.isArray(options) || options.length === 0) this.fail(`${pointer}/${keyword}`, `${keyword} must be a non-empty array`);
      if (node.properties !== undefined) this.fail(pointer, `${keyword} beside properties is not supported`);
      return options.map((option, i) => this.ruleFor(option, `${pointer}/${keyword}/${i}`, `${hint}-${i}`)).join(" | ");
    }
    if (node.allOf !== undefined) {
      if (!Array.isArray(node.allOf) || node.allOf.length !== 1) this.fail(`${pointer}/allOf`, "allOf is supported only with a single schema");
      return this.visit(node.allOf[0], `${pointer}/allOf/0`, hint);
    }

    let type = node.type;
    if (type === undefined) {
      if (node.properties !== undefined || node.additionalProperties !== undefined || node.required !== undefined) type = "object";
      else if (node.items !== undefined || node.prefixItems !== undefined) type = "array";
      else return this.primitive("value");
    }
    if (Array.isArray(type)) {
      if (type.length === 0) this.fail(`${pointer}/type`, "type must not be an empty list");
      return type.map((single, i) => this.ruleFor({ ...node, type: single }, pointer, `${hint}-${String(single ?? i)}`)).join(" | ");
    }
    if (typeof type !== "string" || !KNOWN_TYPES.includes(type)) this.fail(`${pointer}/type`, `unknown type ${JSON.stringify(type)} (expected one of ${KNOWN_TYPES.join(", ")})`);
    switch (type) {
      case "object":
        return this.object(node, pointer, hint);
      case "array":
        return this.array(node, pointer, hint);
      case "string":
        return this.string(node, pointer);
      case "integer":
        return this.integer(node, pointer);
      case "number":
        return this.number(node, pointer);
      default:
        return this.primitive(type);
    }
  }

  private reference(reference: unknown, pointer: string): string {
    if (typeof reference !== "string" || !reference.startsWith("#")) this.fail(pointer, `only local references ("#/$defs/Name") are supported, got ${JSON.stringify(reference)}`);
    const known = this.references.get(reference);
    if (known) return known;
    let target: unknown = this.root;
    const path = reference.slice(1);
    if (path !== "" && !path.startsWith("/")) this.fail(pointer, `reference ${JSON.stringify(reference)} is not a JSON pointer`);
    for (const part of path === "" ? [] : path.slice(1).split("/")) {
      const key = decodeURIComponent(part).replaceAll("~1", "/").replaceAll("~0", "~");
      if (typeof target !== "object" || target === null || !(key in target)) this.fail(pointer, `reference ${JSON.stringify(reference)} points at nothing`);
      target = (target as Record<string, unknown>)[key];
    }
    // Named before it is visited, so that a recursive schema refers to itself.
    const name = path === "" ? this.rootName : this.ruleName(`ref-${path.split("/").pop()}`);
    this.references.set(reference, name);
    if (path !== "") this.rules.set(name, this.visit(target, path, name));
    return name;
  }

  private bound(node: Record<string, unknown>, keyword: string, pointer: string): number | undefined {
    const value = node[keyword];
    if (value === undefined) return undefined;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) this.fail(`${pointer}/${keyword}`, `${keyword} must be a non-negative integer, got ${JSON.stringify(value)}`);
    if (value > MAX_REPETITION) this.fail(`${pointer}/${keyword}`, `${keyword} ${value} is above the supported ${MAX_REPETITION}`);
    return value;
  }

  private bounds(node: Record<string, unknown>, minimumKeyword: string, maximumKeyword: string, pointer: string): [number, number | undefined] {
    const minimum = this.bound(node, minimumKeyword, pointer) ?? 0;
    const maximum = this.bound(node, maximumKeyword, pointer);
    if (maximum !== undefined && maximum < minimum) this.fail(`${pointer}/${maximumKeyword}`, `${maximumKeyword} (${maximum}) is below ${minimumKeyword} (${minimum})`);
    return [minimum, maximum];
  }

  private string(node: Record<string, unknown>, pointer: string): string {
    const [minimum, maximum] = this.bounds(node, "minLength", "maxLength", pointer);
    const pattern = node.pattern;
    const format = node.format;
    if (format !== undefined && typeof format !== "string") this.fail(`${pointer}/format`, "format must be a string");
    if (pattern !== undefined && typeof pattern !== "string") this.fail(`${pointer}/pattern`, "pattern must be a string");
    const enforcedPattern = typeof pattern === "string" ? pattern : typeof format === "string" && Object.hasOwn(STRING_FORMATS, format) ? STRING_FORMATS[format] : undefined;
    const space = this.primitive("space");
    if (enforcedPattern !== undefined) {
      const patternPointer = typeof pattern === "string" ? `${pointer}/pattern` : `${pointer}/format`;
      const anyCharacter = this.primitive("char");
      const writer = { name: (hint: string) => this.ruleName(hint), set: (name: string, body: string) => void this.rules.set(name, body) };
      return `"\\"" ${boundedPatternToGbnf(enforcedPattern, patternPointer, pointer, writer, anyCharacter, { minimum, maximum })} "\\"" ${space}`;
    }
    if (minimum === 0 && maximum === undefined) return this.primitive("string");
    this.primitive("char");
    const repetition = maximum === undefined ? `{${minimum},}` : `{${minimum},${maximum}}`;
    return `"\\"" char${repetition} "\\"" ${space}`;
  }

  private numericBounds(node: Record<string, unknown>, pointer: string): { low: number; high: number } {
    let low = Number.NEGATIVE_INFINITY;
    let high = Number.POSITIVE_INFINITY;
    for (const keyword of ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"]) {
      const value = node[keyword];
      if (value === undefined) continue;
      if (typeof value !== "number" || !Number.isFinite(value)) this.fail(`${pointer}/${keyword}`, `${keyword} must be a finite number`);
      if (keyword === "minimum") low = Math.max(low, value);
      if (keyword === "maximum") high = Math.min(high, value);
      if (keyword === "exclusiveMinimum") low = Math.max(low, node.type === "integer" ? Math.floor(value) + 1 : value);
      if (keyword === "exclusiveMaximum") high = Math.min(high, node.type === "integer" ? Math.ceil(value) - 1 : value);
    }
    if (low > high) this.fail(pointer, `no number is between the minimum (${low}) and the maximum (${high})`);
    return { low, high };
  }

  /** Integers are kept to JavaScript's safe integers (±(2^53 - 1)), which JSON.parse reads exactly. */
  private integer(node: Record<string, unknown>, pointer: string): string {
    let { low, high } = this.numericBounds(node, pointer);
    low = Math.ceil(low);
    high = Math.floor(high);
    if (low > SAFE_BOUND || high < -SAFE_BOUND) this.fail(pointer, `integer bounds beyond ±${SAFE_BOUND} (the safe integers) are not supported`);
    low = Math.max(low, -SAFE_BOUND);
    high = Math.min(high, SAFE_BOUND);
    if (low > high) this.fail(pointer, "no integer is between the minimum and the maximum");
    return `${integerRangeGbnf(low, high)} ${this.primitive("space")}`;
  }

  /**
   * Unbounded numbers as llama.cpp writes them; bounded ones (but a plain minimum of 0) in decimal
   * notation, at most MAX_NUMBER_DIGITS digits, so that they compare with their bounds as doubles do.
   */
  private number(node: Record<string, unknown>, pointer: string): string {
    const { low, high } = this.numericBounds(node, pointer);
    // Bounds a 15-digit decimal cannot reach are no bounds.
    const limit = 10 ** MAX_NUMBER_DIGITS;
    const lowBound = low <= -limit ? Number.NEGATIVE_INFINITY : low;
    const highBound = high >= limit ? Number.POSITIVE_INFINITY : high;
    if (lowBound === Number.NEGATIVE_INFINITY && highBound === Number.POSITIVE_INFINITY) return this.primitive("number");
    const exclusive = (exclusiveKeyword: string, inclusiveKeyword: string, bound: number, tighter: (a: number, b: number) => boolean) => {
      const value = node[exclusiveKeyword];
      const inclusive = node[inclusiveKeyword];
      return typeof value === "number" && value === bound && !(typeof inclusive === "number" && tighter(inclusive, value));
    };
    const lowExclusive = exclusive("exclusiveMinimum", "minimum", low, (a, b) => a > b);
    const highExclusive = exclusive("exclusiveMaximum", "maximum", high, (a, b) => a < b);
    if (lowBound === 0 && !lowExclusive && highBound === Number.POSITIVE_INFINITY) {
      this.primitive("number");
      return 'integral-part ("." decimal-part)? ([eE] [-+]? integral-part)? space';
    }
    for (const [bound, keyword] of [
      [lowBound, lowExclusive ? "exclusiveMinimum" : "minimum"],
      [highBound, highExclusive ? "exclusiveMaximum" : "maximum"],
    ] as const) {
      if (Number.isFinite(bound) && significantDigits(plainDecimal(Math.abs(bound))) > MAX_NUMBER_DIGITS) {
        this.fail(`${pointer}/${keyword}`, `${keyword} ${bound} has more than ${MAX_NUMBER_DIGITS} significant digits, which a number bound may have in a schema for constrained generation`);
      }
    }
    const range = numberRangeGbnf(lowBound, lowExclusive, highBound, highExclusive);
    if (range === undefined) this.fail(pointer, `no number of at most ${MAX_NUMBER_DIGITS} digits is between the minimum and the maximum`);
    return `${range} ${this.primitive("space")}`;
  }

  private array(node: Record<string, unknown>, pointer: string, hint: string): string {
    const space = this.primitive("space");
    const prefix = node.prefixItems;
    if (prefix !== undefined) {
      if (!Array.isArray(prefix)) this.fail(`${pointer}/prefixItems`, "prefixItems must be an array");
      if (node.items !== undefined && node.items !== false) this.fail(`${pointer}/items`, "items beside prefixItems is not supported");
      if (prefix.length === 0) return `"[" ${space} "]" ${space}`;
      const parts = prefix.map((item, i) => this.ruleFor(item, `${pointer}/prefixItems/${i}`, `${hint}-${i}`));
      return `"[" ${space} ${parts.join(` "," ${space} `)} "]" ${space}`;
    }
    const item = node.items === undefined ? this.primitive("value") : this.ruleFor(node.items, `${pointer}/items`, `${hint}-item`);
    const [minimum, maximum] = this.bounds(node, "minItems", "maxItems", pointer);
    if (maximum === 0) return `"[" ${space} "]" ${space}`;
    const rest = (low: number, high: number | undefined) => (high === undefined ? `{${low},}` : `{${low},${high}}`);
    if (minimum === 0) return `"[" ${space} ( ${item} ("," ${space} ${item})${rest(0, maximum === undefined ? undefined : maximum - 1)} )? "]" ${space}`;
    return `"[" ${space} ${item} ("," ${space} ${item})${rest(minimum - 1, maximum === undefined ? undefined : maximum - 1)} "]" ${space}`;
  }

  private object(node: Record<string, unknown>, pointer: string, hint: string): string {
    const space = this.primitive("space");
    const properties = node.properties ?? {};
    if (typeof properties !== "object" || properties === null || Array.isArray(properties)) this.fail(`${pointer}/properties`, "properties must be an object");
    const required = node.required ?? [];
    if (!Array.isArray(required) || required.some((key) => typeof key !== "string")) this.fail(`${pointer}/required`, "required must be an array of strings");
    const declared = properties as Record<string, unknown>;
    const names = [...new Set([...Object.keys(declared), ...(required as string[])])];
    if (names.length === 0) {
      // No declared keys: any keys, with values of additionalProperties (any value by default).
      const extra = node.additionalProperties;
      if (extra === false) return `"{" ${space} "}" ${space}`;
      if (extra === undefined || extra === true) return this.primitive("object");
      const value = this.ruleFor(extra, `${pointer}/additionalProperties`, `${hint}-value`);
      const key = this.primitive("string");
      return `"{" ${space} ( ${key} ":" ${space} ${value} ("," ${space} ${key} ":" ${space} ${value})* )? "}" ${space}`;
    }
    const keyValue = (name: string) => {
      const rule = this.ruleFor(declared[name] ?? true, `${pointer}/properties/${escapePointer(name)}`, `${hint}-${name}`);
      return `${gbnfLiteral(JSON.stringify(name))} ${space} ":" ${space} ${rule}`;
    };
    const requiredSet = new Set(required as string[]);
    const mandatory = names.filter((name) => requiredSet.has(name)).map(keyValue);
    const optional = names.filter((name) => !requiredSet.has(name)).map(keyValue);
    // Optional keys in declaration order, any subset: chain_i ::= kv_i ("," chain_{i+1})? | chain_{i+1}.
    let chain: string | undefined;
    for (let i = optional.length - 1; i >= 0; i--) {
      const name = this.ruleName(`${hint}-optional-${i}`);
      this.rules.set(name, chain === undefined ? optional[i]! : `${optional[i]} ( "," ${space} ${chain} )? | ${chain}`);
      chain = name;
    }
    const head = mandatory.join(` "," ${space} `);
    if (mandatory.length === 0) return `"{" ${space} ( ${chain} )? "}" ${space}`;
    return `"{" ${space} ${head}${chain === undefined ? "" : ` ( "," ${space} ${chain} )?`} "}" ${space}`;
  }
}
