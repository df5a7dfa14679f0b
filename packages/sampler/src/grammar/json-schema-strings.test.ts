// JSON schema patterns, string formats and integer bounds as grammars, checked against references
// that do not share our code: JavaScript's RegExp with the u flag (the dialect JSON schema names)
// for patterns, ajv 8 with ajv-formats (its "full" format checks) for formats and bounds, and zod
// for the schemas zod writes.
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { SeededRandom } from "../seeded-random";
import { sampleOutput } from "./__fixtures__/sample-output";
import { GrammarAutomaton } from "./grammar-automaton";
import { JsonSchemaError } from "./grammar-error";
import { jsonSchemaToGbnf } from "./json-schema-to-gbnf";
import { parseGbnf } from "./parse-gbnf";
import { STRING_FORMATS } from "./string-formats";
import { constraintFromJsonSchema, constraintFromZod } from "./structured-output";

const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats(ajv, { mode: "full" });

function automatonOf(schema: unknown): GrammarAutomaton {
  return new GrammarAutomaton(parseGbnf(jsonSchemaToGbnf(schema)));
}

function accepts(automaton: GrammarAutomaton, text: string): boolean {
  let state = automaton.initialState;
  for (const character of text) {
    state = automaton.step(state, character.codePointAt(0)!);
    if (state < 0) return false;
  }
  return automaton.isAccepting(state);
}

/** JSON text of a string as the grammar writes it: JSON.stringify's, with DEL escaped too. */
function jsonText(value: string): string {
  return JSON.stringify(value).replaceAll("\x7f", "\\u007f");
}

/** Characters the random walks may write: printable ASCII, a raw newline, DEL and a few beyond ASCII. */
const WALK_ALPHABET = [...Array.from({ length: 95 }, (_, i) => String.fromCharCode(0x20 + i)), "\n", "\x7f", "é", "中", "😀", "\u2028", "\u00a0"];

/**
 * A random text the automaton accepts, written character by character from WALK_ALPHABET (each
 * step a random character that keeps a parse alive, those of `preferred` half the time when one
 * is; after an accepting state, stops with probability `stop`). Undefined if it gets stuck or
 * runs past `maxLength`.
 */
function walk(automaton: GrammarAutomaton, random: SeededRandom, preferred: string, stop = 0.2, maxLength = 1000): string | undefined {
  let state = automaton.initialState;
  let text = "";
  while (text.length < maxLength) {
    if (automaton.isAccepting(state) && random.nextDouble() < stop) return text;
    const alive = WALK_ALPHABET.map((character) => [character, automaton.step(state, character.codePointAt(0)!)] as const).filter(([, next]) => next >= 0);
    if (alive.length === 0) return automaton.isAccepting(state) ? text : undefined;
    const favoured = alive.filter(([character]) => preferred.includes(character));
    const choices = favoured.length > 0 && random.nextDouble() < 0.5 ? favoured : alive;
    const [character, next] = choices[random.nextUint32() % choices.length]!;
    text += character;
    state = next;
  }
  return undefined;
}

/** The decoded strings of `count` walks through a string schema's grammar (see `walk`). */
function walkedValues(automaton: GrammarAutomaton, random: SeededRandom, count: number, preferred = ""): string[] {
  const values: string[] = [];
  for (let attempt = 0; values.length < count && attempt < count * 4; attempt++) {
    const text = walk(automaton, random, preferred);
    if (text === undefined) continue;
    const value: unknown = JSON.parse(text);
    expect(typeof value, text).toBe("string");
    values.push(value as string);
  }
  expect(values.length).toBe(count);
  return values;
}

/** Variants of a string: one character deleted, replaced or inserted, at random places. */
function mutations(value: string, alphabet: readonly string[], random: SeededRandom, count: number): string[] {
  const characters = [...value];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const copy = [...characters];
    const at = random.nextUint32() % (copy.length + 1);
    const character = alphabet[random.nextUint32() % alphabet.length]!;
    const kind = random.nextUint32() % 3;
    if (kind === 0 && copy.length > 0) copy.splice(Math.min(at, copy.length - 1), 1);
    else if (kind === 1 && copy.length > 0) copy[Math.min(at, copy.length - 1)] = character;
    else copy.splice(at, 0, character);
    out.push(copy.join(""));
  }
  return out;
}

const zodPatterns = Object.fromEntries(
  Object.entries({ email: z.email(), uuid: z.uuid(), date: z.iso.date(), time: z.iso.time(), datetime: z.iso.datetime(), ipv4: z.ipv4(), ipv6: z.ipv6() }).map(([name, schema]) => [
    `zod's ${name}`,
    (z.toJSONSchema(schema) as { pattern: string }).pattern,
  ]),
);

const patterns: Record<string, string> = {
  "letters then two digits": "^[a-z]+\\d{2}$",
  "E.164 phone number": "^\\+?[1-9]\\d{1,14}$",
  "hex colour": "^#[0-9a-fA-F]{6}$",
  "unanchored: contains": "x",
  "alternatives anchored apart": "ab|^cd|ef$",
  "groups, named group, lazy quantifier": "^(?:foo|bar)(?<tail>[-_.]\\w{2,3}?)*$",
  "quotes and backslashes, which JSON escapes": '^[^"\\\\]{1,5}\\\\"?$',
  "class escapes and dot": "^\\s\\S\\D\\W.$",
  "control characters, non-ASCII, astral": "^[\\u0000-\\u001f\\x7f]?é+\\u{1F600}?\\uD83D\\uDE00?$",
  "repetition of something that can be empty": "^(a|b?)*c{2,}$",
  "escapes in a class, optional hyphen": "^[\\d\\-]{3}-?[^\\s]+$",
  "empty pattern": "",
  "only the empty string": "^$",
  ...zodPatterns,
};

describe("JSON schema pattern → grammar, against RegExp with the u flag", () => {
  for (const [name, pattern] of Object.entries(patterns)) {
    it(`accepts exactly what the pattern matches: ${name}`, () => {
      const regex = new RegExp(pattern, "u");
      const automaton = automatonOf({ type: "string", pattern });
      const random = new SeededRandom(0xbeef, [...name].reduce((sum, c) => sum + c.charCodeAt(0), 0));
      const walked = walkedValues(automaton, random, 40, `"${pattern}`);
      for (const value of walked) expect(regex.test(value), `walked ${JSON.stringify(value)}`).toBe(true);
      // Near misses and random strings: the grammar must agree with the RegExp both ways.
      const alphabet = [...new Set([...pattern.replace(/\\[a-zA-Z]/g, ""), ..."ab019xyzAZ-_.:@/ \"\\\t\n\u2028é😀"])];
      const candidates = [...walked.flatMap((value) => mutations(value, alphabet, random, 4))];
      for (let i = 0; i < 200; i++) {
        const length = random.nextUint32() % 12;
        candidates.push(Array.from({ length }, () => alphabet[random.nextUint32() % alphabet.length]!).join(""));
      }
      let matched = 0;
      for (const value of candidates) {
        const expected = regex.test(value);
        if (expected) matched++;
        expect(accepts(automaton, jsonText(value)), `${JSON.stringify(value)} (RegExp says ${expected})`).toBe(expected);
      }
      expect(matched + walked.length).toBeGreaterThan(0);
    });
  }

  it("single-character constructs agree with RegExp on every ASCII character and Unicode's spaces", () => {
    const probes = [...Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)), ..."\u00a0\u1680\u2000\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff\ue000é中😀\u{10ffff}"];
    for (const construct of [".", "\\s", "\\S", "\\d", "\\D", "\\w", "\\W", "[^a-c\\s]", "[\\b]", "[\\0-\\x1f\"\\\\]", "\\cJ", "\\u{2028}", "[\\/\\-]"]) {
      const pattern = `^${construct}$`;
      const regex = new RegExp(pattern, "u");
      const automaton = automatonOf({ type: "string", pattern });
      for (const probe of probes) expect(accepts(automaton, jsonText(probe)), `${pattern} on U+${probe.codePointAt(0)!.toString(16)}`).toBe(regex.test(probe));
    }
  });

  it("refuses what a grammar cannot enforce, naming the pattern's offset", () => {
    const failure = (pattern: string) => {
      try {
        jsonSchemaToGbnf({ type: "object", properties: { id: { type: "string", pattern } } });
      } catch (error) {
        expect(error).toBeInstanceOf(JsonSchemaError);
        expect((error as JsonSchemaError).pointer).toBe("/properties/id/pattern");
        return (error as JsonSchemaError).reason;
      }
      throw new Error(`expected ${pattern} to be refused`);
    };
    expect(failure("^(?=a)a+$")).toMatch(/offset 1: lookahead and lookbehind/);
    expect(failure("(?<!a)b")).toMatch(/lookahead and lookbehind/);
    expect(failure("^(a)\\1$")).toMatch(/offset 4: backreferences/);
    expect(failure("\\bword")).toMatch(/word boundaries/);
    expect(failure("\\p{L}+")).toMatch(/Unicode property escapes/);
    expect(failure("a{2")).toMatch(/incomplete quantifier/);
    expect(failure("(ab")).toMatch(/unterminated group/);
    expect(failure("[a-")).toMatch(/unterminated character class/);
    expect(failure("[z-a]")).toMatch(/range out of order/);
    expect(failure("a**")).toMatch(/nothing to repeat/);
    expect(failure("a(^b)")).toMatch(/\^ and \$ are supported only at the start and end/);
    expect(failure("\\q")).toMatch(/invalid escape/);
    expect(failure("a{1,200000}")).toMatch(/above the supported/);
    // Each of these is also a syntax error for RegExp with the u flag, or a feature we refuse.
    for (const pattern of ["a{2", "(ab", "[a-", "[z-a]", "a**", "\\q"]) expect(() => new RegExp(pattern, "u")).toThrow();
  });

});

describe("JSON schema pattern with minLength/maxLength → grammar, against RegExp and the length in code points", () => {
  const cases: [name: string, pattern: string, minLength: number | undefined, maxLength: number | undefined][] = [
    ["letters, at least one (implied by the pattern)", "^[a-z]+$", 1, undefined],
    ["letters then digits, 3 to 6", "^[a-z]+\\d*$", 3, 6],
    ["unanchored: contains, at most 4", "x", undefined, 4],
    ["alternatives anchored apart, 3 to 5", "ab|^cd|ef$", 3, 5],
    ["escaped quotes and backslashes count as one character", '^[^"\\\\]{1,5}\\\\"?$', undefined, 3],
    ["repetition of something that can be empty, at least 5 (no maximum)", "^(a|b?)*c{2,}$", 5, undefined],
    ["astral characters count as one", "^é+\\u{1F600}?$", 2, 3],
    ["exact length", "^[a-c]*-?[0-9]*$", 4, 4],
    ["zod's email, at most 20", zodPatterns["zod's email"]!, undefined, 20],
    ["zod's uuid, exactly its own length", zodPatterns["zod's uuid"]!, 36, 36],
  ];
  for (const [name, pattern, minLength, maxLength] of cases) {
    it(`accepts exactly the strings that match and fit: ${name}`, () => {
      const regex = new RegExp(pattern, "u");
      const fits = (value: string) => regex.test(value) && [...value].length >= (minLength ?? 0) && [...value].length <= (maxLength ?? Number.POSITIVE_INFINITY);
      const automaton = automatonOf({ type: "string", pattern, minLength, maxLength });
      const random = new SeededRandom(0xfeed, [...name].reduce((sum, c) => sum + c.charCodeAt(0), 0));
      const walked = walkedValues(automaton, random, 40, `"${pattern}`);
      for (const value of walked) expect(fits(value), `walked ${JSON.stringify(value)}`).toBe(true);
      // No dead ends: every prefix the grammar allows can still be finished.
      const stuck = Array.from({ length: 40 }, () => walk(automaton, random, `"${pattern}`, 0.05)).filter((text) => text === undefined);
      expect(stuck.length).toBe(0);
      const alphabet = [...new Set([...pattern.replace(/\\[a-zA-Z]/g, ""), ..."ab019xyzAZ-_.:@/ \"\\\t\n\u2028é😀"])];
      const candidates = [...walked.flatMap((value) => mutations(value, alphabet, random, 6))];
      for (let i = 0; i < 300; i++) {
        const length = random.nextUint32() % ((maxLength ?? 8) + 3);
        candidates.push(Array.from({ length }, () => alphabet[random.nextUint32() % alphabet.length]!).join(""));
      }
      let fitting = 0;
      for (const value of candidates) {
        const expected = fits(value);
        if (expected) fitting++;
        expect(accepts(automaton, jsonText(value)), `${JSON.stringify(value)} (fits: ${expected})`).toBe(expected);
      }
      expect(fitting).toBeGreaterThan(0);
      expect(fitting).toBeLessThan(candidates.length);
    });
  }

  it("refuses bounds that no matching string meets, and products too large to write, naming the keyword", () => {
    const failure = (schema: Record<string, unknown>) => {
      try {
        jsonSchemaToGbnf({ type: "object", properties: { id: { type: "string", ...schema } } });
      } catch (error) {
        expect(error).toBeInstanceOf(JsonSchemaError);
        return [(error as JsonSchemaError).pointer, (error as JsonSchemaError).reason];
      }
      throw new Error(`expected ${JSON.stringify(schema)} to be refused`);
    };
    expect(failure({ pattern: "^[a-z]{3}$", maxLength: 2 })).toEqual(["/properties/id/maxLength", 'no string of 0 to 2 characters matches pattern "^[a-z]{3}$"']);
    expect(failure({ pattern: "^[a-z]{3}$", minLength: 4 })).toEqual(["/properties/id/minLength", 'no string of 4 or more characters matches pattern "^[a-z]{3}$"']);
    expect(failure({ pattern: "^(?:ab)+$", minLength: 3, maxLength: 3 })).toEqual(["/properties/id", 'no string of 3 characters matches pattern "^(?:ab)+$"']);
    expect(failure({ pattern: "^[a-z]*$", minLength: 1, maxLength: 100_000 })[0]).toBe("/properties/id/maxLength");
    expect(failure({ pattern: "^[a-z]*$", minLength: 1, maxLength: 100_000 })[1]).toMatch(/needs a grammar of more than 50000 rules/);
    expect(failure({ pattern: "^(?:a{1,1000}){1,1000}$", maxLength: 5 })[1]).toMatch(/at most 20000 positions/);
    expect(failure({ pattern: "^(?=a)", maxLength: 5 })[0]).toBe("/properties/id/pattern");
  });
});

describe("JSON schema string formats → grammar, against ajv-formats", () => {
  const random = new SeededRandom(4242);
  const pick = (n: number) => random.nextUint32() % n;
  const hex = (digits: number) => Array.from({ length: digits }, () => "0123456789abcdefABCDEF"[pick(22)]).join("");
  const label = () => {
    const length = 1 + pick(8);
    return Array.from({ length }, (_, i) => (i > 0 && i < length - 1 && pick(4) === 0 ? "-" : "abcxyz019"[pick(9)])).join("");
  };
  /** Ordinary values of each format, made independently of the grammars. */
  const examples: Record<string, () => string> = {
    "date-time": () => new Date(Date.UTC(1900 + pick(300), 0, 1) + pick(366 * 86400) * 1000 + pick(1000)).toISOString(),
    date: () => new Date(Date.UTC(1600 + pick(800), 0, 1) + pick(366) * 86400_000).toISOString().slice(0, 10),
    time: () => `${new Date(pick(86400_000)).toISOString().slice(11, 23)}${pick(2) ? "Z" : `${pick(2) ? "+" : "-"}${String(pick(24)).padStart(2, "0")}:${String(pick(60)).padStart(2, "0")}`}`,
    duration: () => ["P3Y6M4DT12H30M5S", "P1W", "PT36H", "P1M", "PT0S", `P${pick(99)}D`, `PT${pick(60)}M${pick(60)}S`][pick(7)]!,
    uuid: () => (pick(2) ? crypto.randomUUID() : `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`),
    ipv4: () => Array.from({ length: 4 }, () => String(pick(256))).join("."),
    ipv6: () => {
      const groups = Array.from({ length: 8 }, () => pick(65536).toString(16));
      const from = pick(8);
      const to = from + pick(8 - from);
      return pick(3) === 0 ? groups.join(":") : `${groups.slice(0, from).join(":")}::${groups.slice(to + 1).join(":")}`;
    },
    hostname: () => Array.from({ length: 1 + pick(4) }, label).join("."),
    email: () => `${label()}${pick(2) ? `.${label()}` : ""}@${label()}.${label()}`,
  };

  it("covers OpenAI's structured-output formats", () => {
    expect(Object.keys(STRING_FORMATS).sort()).toEqual(Object.keys(examples).sort());
  });

  /**
   * Walks through the grammar of a format schema validate with ajv, and so do the near misses of
   * them the grammar accepts; of `count` ordinary values of the format, the grammar accepts exactly
   * those ajv accepts. Returns how many ajv accepted.
   */
  function checkFormatSchema(schema: { type: "string"; format: string; minLength?: number; maxLength?: number }, count: number): number {
    const validate = ajv.compile(schema);
    const automaton = automatonOf(schema);
    const walked = walkedValues(automaton, random, 60);
    for (const value of walked) expect(validate(value), `walked ${JSON.stringify(value)}`).toBe(true);
    const alphabet = [...new Set(walked.join("") + ":-.T0129aZ@+")];
    for (const value of walked.flatMap((v) => mutations(v, alphabet, random, 5))) {
      if (accepts(automaton, jsonText(value))) expect(validate(value), `mutated ${JSON.stringify(value)}`).toBe(true);
    }
    let valid = 0;
    for (let i = 0; i < count; i++) {
      const value = examples[schema.format]!();
      if (validate(value)) valid++;
      expect(accepts(automaton, jsonText(value)), `example ${value} (ajv says ${validate(value)})`).toBe(validate(value));
    }
    return valid;
  }

  for (const format of Object.keys(examples)) {
    it(`writes only values ajv accepts, and ordinary values: ${format}`, () => {
      expect(checkFormatSchema({ type: "string", format }, 100)).toBe(100);
    });
  }

  const boundedFormats: [format: string, minLength: number | undefined, maxLength: number | undefined][] = [
    ["email", 10, 24],
    ["email", undefined, 12],
    ["hostname", 3, 12],
    ["date-time", 21, 24],
    ["duration", 4, 6],
    ["ipv6", undefined, 9],
    ["time", 12, 14],
  ];
  for (const [format, minLength, maxLength] of boundedFormats) {
    it(`with minLength ${minLength ?? "-"} and maxLength ${maxLength ?? "-"}, writes only values ajv accepts: ${format}`, () => {
      // The ordinary values the format's grammar accepts: those of the right length, and only those.
      const schema = { type: "string" as const, format, ...(minLength === undefined ? {} : { minLength }), ...(maxLength === undefined ? {} : { maxLength }) };
      expect(checkFormatSchema(schema, 300)).toBeGreaterThan(0);
    });
  }

  it("checks days per month and leap years in dates", () => {
    const automaton = automatonOf({ type: "string", format: "date" });
    const validate = ajv.compile({ type: "string", format: "date" });
    for (const year of [1900, 2000, 2023, 2024, 2100, 2400, 1996, 1, 4, 100]) {
      for (const month of [1, 2, 4, 12]) {
        for (const day of [0, 1, 28, 29, 30, 31, 32]) {
          const text = `${String(year).padStart(4, "0")}-${String(month).padStart(2, "0")}-${String(day).padStart(2, "0")}`;
          expect(accepts(automaton, jsonText(text)), text).toBe(validate(text));
        }
      }
    }
  });

  it("leaves formats it does not know as annotations (any string), as JSON schema 2020-12 and llama.cpp do", () => {
    const automaton = automatonOf({ type: "string", format: "uri", maxLength: 5 });
    expect(accepts(automaton, '"abc"')).toBe(true);
    expect(accepts(automaton, '"abcdef"')).toBe(false);
  });
});

describe("JSON schema integer bounds → grammar, against ajv", () => {
  const S = Number.MAX_SAFE_INTEGER;
  const ranges: Record<string, Record<string, number>> = {
    "minimum 1 (zod's .int().min(1))": { minimum: 1, maximum: S },
    "minimum 1 alone": { minimum: 1 },
    "-37 to 1234": { minimum: -37, maximum: 1234 },
    "a single value": { minimum: 100, maximum: 100 },
    "negative only": { minimum: -5, maximum: -1 },
    "at most -10": { maximum: -10 },
    "at most 250": { maximum: 250 },
    "10 to 99": { minimum: 10, maximum: 99 },
    "999 to 1000": { minimum: 999, maximum: 1000 },
    "-1e6 to 123456789": { minimum: -1_000_000, maximum: 123_456_789 },
    "minimum 1234567 (7 digits)": { minimum: 1_234_567 },
    "exclusive 0 to 5.5": { exclusiveMinimum: 0, exclusiveMaximum: 5.5 },
    "fractional bounds -2.5 to 7.2": { minimum: -2.5, maximum: 7.2 },
    "zod's .int() (unbounded)": { minimum: -S, maximum: S },
  };
  const random = new SeededRandom(777);
  const magnitude = () => Math.floor(random.nextDouble() * 10 ** (random.nextUint32() % 10)) * (random.nextUint32() % 3 === 0 ? -1 : 1);
  it("accepts exactly the integers ajv does: 300 random ranges", () => {
    for (let i = 0; i < 300; i++) {
      const [low, high] = [magnitude(), magnitude()].sort((a, b) => a - b) as [number, number];
      const schema = i % 5 === 0 ? { type: "integer", minimum: low } : i % 5 === 1 ? { type: "integer", maximum: high } : { type: "integer", minimum: low, maximum: high };
      const validate = ajv.compile(schema);
      const automaton = automatonOf(schema);
      const values = [0, 1, -1, 10 ** 12];
      for (const center of [low, high]) for (let d = -12; d <= 12; d++) values.push(center + d, center * 10 + d, Math.trunc(center / 10) + d);
      for (let j = 0; j < 40; j++) values.push(low + Math.floor(random.nextDouble() * (high - low + 1)), magnitude());
      for (const value of values) expect(accepts(automaton, JSON.stringify(value)), `${value} in ${JSON.stringify(schema)}`).toBe(validate(value));
    }
  });
  for (const [name, bounds] of Object.entries(ranges)) {
    it(`accepts exactly the integers ajv does: ${name}`, () => {
      const schema = { type: "integer", ...bounds };
      const validate = ajv.compile(schema);
      const automaton = automatonOf(schema);
      const values = new Set<number>();
      for (const center of [0, ...Object.values(bounds).map(Math.trunc), 9, 10, 99, 100, 999, 1000, 10 ** 7, 10 ** 15, S]) {
        for (let d = -40; d <= 40; d++) for (const sign of [1, -1]) values.add(sign * center + d);
      }
      for (let i = 0; i < 500; i++) values.add(Math.round((random.nextDouble() - 0.5) * 10 ** (1 + (random.nextUint32() % 16))));
      let valid = 0;
      for (const value of values) {
        if (!Number.isSafeInteger(value)) continue;
        const expected = validate(value);
        if (expected) valid++;
        expect(accepts(automaton, JSON.stringify(value)), `${value} (ajv says ${expected})`).toBe(expected);
      }
      expect(valid).toBeGreaterThan(0);
      // Only JSON's own spelling of an integer, and only safe integers (JSON.parse reads them exactly).
      for (const text of ["-0", "01", "+1", "00", "9007199254740992", "-9007199254740992", "1e3"]) expect(accepts(automaton, text), text).toBe(false);
    });
  }
});

describe("JSON schema number bounds → grammar, against ajv", () => {
  const random = new SeededRandom(31337);
  /** A random bound: up to 4 fraction digits, magnitudes up to 10^6. */
  const bound = () => Number(((random.nextDouble() - 0.3) * 10 ** (random.nextUint32() % 7)).toFixed(random.nextUint32() % 5));
  /** Decimal texts near a value (and elsewhere), as the grammar may write them: no exponent, at most 15 digits, no "-0". */
  const near = (value: number): string[] => {
    const out: string[] = [];
    for (let digits = 0; digits <= 6; digits++) {
      for (let k = -3; k <= 3; k++) out.push((value + k * 10 ** -digits).toFixed(digits), (value + k * 10 ** -digits).toFixed(digits + 2));
    }
    return out.filter((text) => !/^-0(\.0*)?$/.test(text) && text.replace(/[-.]/g, "").replace(/^0+(?=\d)/, "").length <= 15);
  };

  it("accepts exactly the decimals ajv does: 300 random ranges, inclusive and exclusive", () => {
    let accepted = 0;
    for (let i = 0; i < 300; i++) {
      const [low, high] = [bound(), bound()].sort((a, b) => a - b) as [number, number];
      const lowKeyword = random.nextUint32() % 2 ? "minimum" : "exclusiveMinimum";
      const highKeyword = random.nextUint32() % 2 ? "maximum" : "exclusiveMaximum";
      const sides = i % 4;
      const schema = { type: "number", ...(sides !== 1 ? { [lowKeyword]: low } : {}), ...(sides !== 2 ? { [highKeyword]: high } : {}) };
      if (low === high && (lowKeyword.startsWith("exclusive") || highKeyword.startsWith("exclusive")) && sides === 0) {
        expect(() => jsonSchemaToGbnf(schema)).toThrow(/no number/);
        continue;
      }
      const validate = ajv.compile(schema);
      const automaton = automatonOf(schema);
      const texts = [...near(low), ...near(high), ...near(0), ...near((low + high) / 2), "1", "-1", "1000000", "0.5"];
      for (const text of texts) {
        const expected = validate(JSON.parse(text));
        if (expected) accepted++;
        expect(accepts(automaton, text), `${text} in ${JSON.stringify(schema)} (ajv says ${expected})`).toBe(expected);
      }
    }
    expect(accepted).toBeGreaterThan(1000);
  });

  it("writes no exponent, no negative zero, no more than 15 digits, and refuses bounds it cannot compare", () => {
    const automaton = automatonOf({ type: "number", exclusiveMinimum: -1, maximum: 1 });
    for (const text of ["1e0", "-0", "-0.0", "0.1234567890123456", "01", "1.", ".5"]) expect(accepts(automaton, text), text).toBe(false);
    for (const text of ["0", "0.0", "-0.5", "1.000", "0.12345678901234"]) expect(accepts(automaton, text), text).toBe(true);
    const wide = automatonOf({ type: "number", minimum: 0.5, maximum: 100 });
    expect(accepts(wide, "42.1234567890123")).toBe(true); // 15 digits
    expect(accepts(wide, "42.12345678901234")).toBe(false);
    expect(() => jsonSchemaToGbnf({ type: "number", minimum: 1 / 3 })).toThrow(/minimum 0.3333333333333333 has more than 15 significant digits/);
    expect(() => jsonSchemaToGbnf({ type: "number", exclusiveMinimum: 1, exclusiveMaximum: 1 })).toThrow(/no number/);
    // zod's positive() and a probability range, sampled into values zod accepts.
    const schema = z.object({ price: z.number().positive(), p: z.number().min(0).max(1), t: z.number().gt(-1.5).lte(2.25) });
    const constraint = constraintFromZod(schema);
    const sampling = new GrammarAutomaton(constraint.grammar);
    for (let seed = 1; seed <= 4; seed++) expect(schema.safeParse(constraint.parse(sampleOutput(sampling, seed, "lazy"))).success).toBe(true);
  }, 60_000);
});

describe("zod schemas with formats, patterns and bounds, sampled", () => {
  // An email only with a maxLength: its parts are otherwise unbounded, and random logits rarely
  // pick "@" among ~150k tokens; the bound makes the grammar close it in time.
  const schema = z.object({
    contact: z.email().max(24),
    tag: z.string().regex(/^[a-z]+$/).min(2).max(6),
    id: z.uuid(),
    day: z.iso.date(),
    at: z.iso.datetime(),
    ip: z.ipv4(),
    count: z.int().min(1),
    offset: z.int().min(-20).max(300),
    code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
  });

  it("every sampled output validates, where these schemas were refused before", () => {
    const constraint = constraintFromZod(schema);
    const automaton = new GrammarAutomaton(constraint.grammar);
    for (let seed = 1; seed <= 6; seed++) {
      const text = sampleOutput(automaton, seed, seed % 2 === 0 ? "lazy" : "full");
      expect(schema.safeParse(constraint.parse(text)).success, text).toBe(true);
    }
  }, 60_000);

  it("does the same from the JSON schema, validated by ajv with formats", () => {
    const json = z.toJSONSchema(schema);
    const validate = ajv.compile(json);
    const constraint = constraintFromJsonSchema(json);
    const automaton = new GrammarAutomaton(constraint.grammar);
    for (let seed = 11; seed <= 14; seed++) {
      const value = constraint.parse(sampleOutput(automaton, seed, "lazy"));
      expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
    }
  }, 60_000);
});
