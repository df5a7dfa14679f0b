import { describe, expect, it } from "vitest";
import { z } from "zod";
import { qwen3TokenPieces } from "./__fixtures__/qwen3-token-pieces";
import { sampleOutput } from "./__fixtures__/sample-output";
import type { GrammarMode } from "./constrained-sampler";
import { GrammarAutomaton } from "./grammar-automaton";
import { JsonSchemaError } from "./grammar-error";
import { GrammarMatcher } from "./grammar-matcher";
import { jsonSchemaToGbnf } from "./json-schema-to-gbnf";
import { type OutputConstraint, constraintFromJsonSchema, constraintFromResponseFormat, constraintFromZod } from "./structured-output";

const Color = z.enum(["red", "green", "blue"]);
const zodSchemas: Record<string, z.ZodType> = {
  "object with required and optional properties": z.object({
    name: z.string().min(1).max(12),
    age: z.number().int().min(0).max(150),
    nickname: z.string().max(6).optional(),
    admin: z.boolean().optional(),
    color: Color.optional(),
  }),
  "arrays with bounds, numbers, null and literals": z.object({
    tags: z.array(z.string().max(5)).min(1).max(3),
    scores: z.array(z.number()).max(2),
    kind: z.literal("point"),
    missing: z.null(),
    level: z.number().int().nonnegative(),
  }),
  "union, nullable and tuple": z.object({
    id: z.union([z.number().int().min(-5).max(5), z.string().max(4)]),
    parent: z.string().max(4).nullable(),
    pair: z.tuple([z.boolean(), Color]),
  }),
  "nested objects in an array": z.array(z.object({ x: z.number().int().min(0).max(9), label: z.string().max(3).optional() })).min(2).max(3),
};

describe("structured output from zod schemas", () => {
  for (const [name, schema] of Object.entries(zodSchemas)) {
    it(`every sampled output parses and validates: ${name}`, () => {
      const constraint = constraintFromZod(schema);
      const automaton = new GrammarAutomaton(constraint.grammar);
      for (let seed = 1; seed <= 6; seed++) {
        const mode: GrammarMode = seed % 2 === 0 ? "lazy" : "full";
        const text = sampleOutput(automaton, seed, mode);
        const value = constraint.parse(text);
        expect(schema.safeParse(value).success, text).toBe(true);
      }
    }, 60_000);
  }

  it("returns zod's parsed value, typed by the schema", () => {
    const constraint = constraintFromZod(z.object({ n: z.number().int().min(0).max(3) }));
    const value: { n: number } = constraint.parse('{"n": 2}');
    expect(value).toEqual({ n: 2 });
    expect(() => constraint.parse('{"n": 7}')).toThrow();
  });
});

describe("structured output from JSON schemas", () => {
  const recursive = {
    $defs: {
      node: {
        type: "object",
        properties: { v: { type: "integer", minimum: 0, maximum: 9 }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } },
        required: ["v", "next"],
        additionalProperties: false,
      },
    },
    $ref: "#/$defs/node",
  };

  it("samples recursive $ref/$defs structures that stay valid", () => {
    const constraint = constraintFromJsonSchema(recursive);
    const automaton = new GrammarAutomaton(constraint.grammar);
    const check = (node: unknown): void => {
      expect(node).toMatchObject({ v: expect.any(Number) });
      const { v, next } = node as { v: number; next: unknown };
      expect(Number.isInteger(v) && v >= 0 && v <= 9).toBe(true);
      if (next !== null) check(next);
    };
    for (let seed = 1; seed <= 8; seed++) check(constraintFromJsonSchema(recursive).parse(sampleOutput(automaton, seed, "lazy")));
  }, 60_000);

  it("samples strings with length bounds, const, enum, type lists and string escapes that JSON.parse reads", () => {
    const schema = {
      type: "object",
      properties: {
        code: { type: "string", minLength: 2, maxLength: 4 },
        version: { const: 3 },
        mode: { enum: ["a", 1, null, { deep: true }] },
        either: { type: ["integer", "boolean"] },
      },
      required: ["code", "version", "mode", "either"],
    };
    const constraint = constraintFromJsonSchema(schema);
    const automaton = new GrammarAutomaton(constraint.grammar);
    for (let seed = 1; seed <= 10; seed++) {
      const value = constraint.parse(sampleOutput(automaton, seed, "full")) as Record<string, unknown>;
      expect([...(value.code as string)].length).toBeGreaterThanOrEqual(2);
      expect([...(value.code as string)].length).toBeLessThanOrEqual(4);
      expect(value.version).toBe(3);
      expect(["a", 1, null, JSON.stringify({ deep: true })]).toContainEqual(typeof value.mode === "object" && value.mode !== null ? JSON.stringify(value.mode) : value.mode);
      expect(typeof value.either === "boolean" || Number.isInteger(value.either)).toBe(true);
    }
  }, 60_000);

  it("writes optional properties as any subset in declaration order", () => {
    const gbnf = jsonSchemaToGbnf({ type: "object", properties: { a: { type: "boolean" }, b: { type: "null" } } });
    const matcher = new GrammarMatcher(new GrammarAutomaton(constraintFromJsonSchema({ type: "object", properties: { a: { type: "boolean" }, b: { type: "null" } } }).grammar), qwen3TokenPieces().trie);
    expect(gbnf).toContain("root ::=");
    for (const text of ["{}", '{"a": true}', '{"b": null}', '{"a":false,"b":null}']) {
      const fork = matcher.fork();
      fork.acceptText(text);
      expect(fork.isAccepting, text).toBe(true);
    }
    expect(matcher.advanceBytes(new TextEncoder().encode('{"b": null, "a"'))).toBeUndefined();
    expect(matcher.advanceBytes(new TextEncoder().encode('{"c"'))).toBeUndefined();
  });

  it("names the offending part of an invalid or unsupported schema by its JSON pointer", () => {
    const pointerOf = (schema: unknown) => {
      try {
        jsonSchemaToGbnf(schema);
      } catch (error) {
        if (error instanceof JsonSchemaError) return [error.pointer, error.message];
        throw error;
      }
      throw new Error("expected a JsonSchemaError");
    };
    expect(pointerOf({ type: "strng" })).toEqual(["/type", 'unknown type "strng" (expected one of object, array, string, number, integer, boolean, null) (at /type)']);
    expect(pointerOf({ type: "object", properties: { "a/b": { type: "string", pattern: "^(?=x)" } } })[0]).toBe("/properties/a~1b/pattern");
    expect(pointerOf({ type: "array", items: { type: "string", minLength: 3, maxLength: 2 } })[0]).toBe("/items/maxLength");
    expect(pointerOf({ $ref: "#/$defs/missing" })[0]).toBe("/$ref");
    expect(pointerOf({ $ref: "https://example.com/schema" })[1]).toMatch(/only local references/);
    expect(pointerOf({ anyOf: [] })[0]).toBe("/anyOf");
    expect(pointerOf({ type: "string", maxLength: 10_000_000 })[1]).toMatch(/above the supported/);
    expect(pointerOf({ type: "string", format: "uuid", maxLength: 9 })).toEqual(["/maxLength", expect.stringMatching(/^no string of 0 to 9 characters matches pattern /)]);
    expect(pointerOf({ type: "object", properties: { d: { type: "string", format: "date", minLength: 11 } } })[0]).toBe("/properties/d/minLength");
    expect(pointerOf({ type: "string", format: 3 })[0]).toBe("/format");
    expect(pointerOf({ type: "integer", minimum: 2 ** 60 })[1]).toMatch(/beyond/);
    expect(pointerOf({ type: "number", minimum: 0.1 + 0.2 })[0]).toBe("/minimum");
    expect(pointerOf(false)[1]).toMatch(/allows no value/);
  });

  it("rejects a schema whose references loop without consuming anything", () => {
    expect(() => constraintFromJsonSchema({ $defs: { a: { $ref: "#/$defs/b" }, b: { anyOf: [{ $ref: "#/$defs/a" }, { type: "null" }] } }, $ref: "#/$defs/a" })).toThrow(/left recursion/);
  });

  it("rejects zod schemas that have no JSON schema or that need unsupported keywords, clearly", () => {
    expect(() => constraintFromZod(z.object({ when: z.date() }))).toThrow(JsonSchemaError);
    expect(() => constraintFromZod(z.object({ even: z.int().multipleOf(2) }))).toThrow(/multipleOf.*\/properties\/even\/multipleOf/);
  });
});

describe("constraintFromResponseFormat", () => {
  it("turns OpenAI response_format objects into constraints", () => {
    expect(constraintFromResponseFormat({ type: "text" })).toBeUndefined();
    const object = constraintFromResponseFormat({ type: "json_object" })!;
    const matcher = new GrammarMatcher(new GrammarAutomaton(object.grammar), qwen3TokenPieces().trie);
    matcher.acceptText('{"anything": [1, "two", {"three": null}]}');
    expect(matcher.isAccepting).toBe(true);
    expect(matcher.fork().advanceBytes(new TextEncoder().encode("x"))).toBeUndefined();
    matcher.reset();
    expect(matcher.advanceBytes(new TextEncoder().encode("[1]"))).toBeUndefined();
    const schema = constraintFromResponseFormat({
      type: "json_schema",
      json_schema: { name: "answer", strict: true, schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false } },
    })!;
    expect(schema.gbnf).toContain('"\\"ok\\""');
    const strict = new GrammarMatcher(new GrammarAutomaton(schema.grammar), qwen3TokenPieces().trie);
    strict.acceptText('{"ok": false}');
    expect(strict.isAccepting).toBe(true);
    expect(schema.parse('{"ok": false}')).toEqual({ ok: false });
  });

  it("reports malformed response_format objects with a pointer into them", () => {
    expect(() => constraintFromResponseFormat({ type: "xml" })).toThrow(JsonSchemaError);
    try {
      constraintFromResponseFormat({ type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "nope" } } } } });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(JsonSchemaError);
      expect((error as JsonSchemaError).pointer).toBe("/json_schema/schema/properties/a/type");
    }
  });
});
