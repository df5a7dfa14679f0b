import { z } from "zod";
import type { Grammar } from "./grammar";
import { JsonSchemaError } from "./grammar-error";
import { grammarFromJsonSchema, jsonSchemaToGbnf } from "./json-schema-to-gbnf";
import { parseGbnf } from "./parse-gbnf";

/** A grammar and how to read the finished text back: JSON parsed and validated, or the text as is. */
export interface OutputConstraint<Value = unknown> {
  readonly grammar: Grammar;
  /** The GBNF the grammar was parsed from (to inspect, or to hand to llama.cpp). */
  readonly gbnf: string;
  /** The value of a complete output; throws when it does not parse or validate. */
  parse(text: string): Value;
}

/** The JSON schema of a zod schema, by zod 4's own conversion (what cannot be represented is an error). */
export function zodToJsonSchema(schema: z.ZodType): Record<string, unknown> {
  try {
    return z.toJSONSchema(schema, { unrepresentable: "throw" }) as Record<string, unknown>;
  } catch (error) {
    throw new JsonSchemaError("", `the zod schema has no JSON schema: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Output constrained to a zod schema; `parse` returns the value zod parsed (typed by the schema). */
export function constraintFromZod<Schema extends z.ZodType>(schema: Schema): OutputConstraint<z.output<Schema>> {
  const gbnf = jsonSchemaToGbnf(zodToJsonSchema(schema));
  return { grammar: parseGbnf(gbnf), gbnf, parse: (text) => schema.parse(JSON.parse(text)) };
}

/** Output constrained to a JSON schema; `parse` returns the parsed JSON (the grammar has enforced the schema). */
export function constraintFromJsonSchema(schema: unknown): OutputConstraint<unknown> {
  const gbnf = jsonSchemaToGbnf(schema);
  return { grammar: parseGbnf(gbnf), gbnf, parse: (text) => JSON.parse(text) as unknown };
}

/** Output constrained to a GBNF grammar; `parse` returns the text. */
export function constraintFromGbnf(gbnf: string, options: { readonly root?: string } = {}): OutputConstraint<string> {
  return { grammar: parseGbnf(gbnf, options), gbnf, parse: (text) => text };
}

/** Whether a value is a zod schema (as opposed to a JSON schema object). */
export function isZodSchema(schema: unknown): schema is z.ZodType {
  return schema instanceof z.ZodType;
}

/** A zod schema or a JSON schema object, whichever it is. */
export function constraintFromSchema(schema: unknown): OutputConstraint<unknown> {
  return isZodSchema(schema) ? constraintFromZod(schema) : constraintFromJsonSchema(schema);
}

const responseFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object"), schema: z.unknown().optional() }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({ name: z.string().optional(), description: z.string().optional(), schema: z.unknown().optional(), strict: z.boolean().nullish() }),
  }),
]);

/** OpenAI's `response_format` request field (plus llama.cpp's `json_object` with a `schema`). */
export type ResponseFormat = z.input<typeof responseFormatSchema>;

/**
 * The constraint an OpenAI `response_format` asks for: none for `{ type: "text" }`, any JSON
 * object for `{ type: "json_object" }` (or its `schema` when given, as llama.cpp's server
 * accepts), the schema of `{ type: "json_schema", json_schema: { schema } }`. A malformed object
 * or schema is a JsonSchemaError whose pointer starts at the response_format object.
 */
export function constraintFromResponseFormat(responseFormat: unknown): OutputConstraint<unknown> | undefined {
  const parsed = responseFormatSchema.safeParse(responseFormat);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new JsonSchemaError(issue.path.map((part) => `/${String(part)}`).join(""), `invalid response_format: ${issue.message}`);
  }
  const format = parsed.data;
  if (format.type === "text") return undefined;
  const schema = format.type === "json_object" ? (format.schema ?? { type: "object" }) : (format.json_schema.schema ?? { type: "object" });
  const prefix = format.type === "json_object" ? "/schema" : "/json_schema/schema";
  try {
    return constraintFromJsonSchema(schema);
  } catch (error) {
    if (error instanceof JsonSchemaError) throw new JsonSchemaError(`${prefix}${error.pointer}`, error.reason);
    throw error;
  }
}

export { grammarFromJsonSchema };
