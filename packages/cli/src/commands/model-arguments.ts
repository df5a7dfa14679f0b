import type { KVType } from "@memra/core";
import { type MetadataOverride, openGGUFModel, parseMetadataOverride } from "@memra/gguf";
import { Tokenizer } from "@memra/tokenizer";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";

/** The model path of `-m/--model`, required. */
export function requireModelPath(model: string | undefined, usage: string): string {
  if (!model) throw new CliError(`missing -m MODEL\n${usage}`);
  return model;
}

/** Builds just the tokenizer of a GGUF file (no weights are read; a split model's first shard holds it). */
export function loadTokenizer(path: string): Tokenizer {
  const file = openGGUFModel(path);
  return Tokenizer.fromGGUFMetadata((key) => file.get(key));
}

/** "1,2,3" → [1, 2, 3], naming the bad item. */
export function parseTokenList(text: string): number[] {
  return text.split(",").map((item, index) => {
    const value = Number(item.trim());
    if (item.trim() === "" || !Number.isInteger(value) || value < 0) throw new CliError(`--tokens: item ${index + 1} ("${item}") is not a token id`);
    return value;
  });
}

/** A positive integer option, naming it when it is not. */
export function parsePositiveInteger(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new CliError(`${name} must be a positive integer, got "${value}"`);
  return parsed;
}

/** The JSON-encoded strings of standard input, one a line (blank lines skipped), naming a line that is not one. */
export async function* jsonStringLines(io: CliIO): AsyncIterable<string> {
  let line = 0;
  for await (const raw of io.stdinLines()) {
    line++;
    if (raw.trim() === "") continue;
    let text: unknown;
    try {
      text = JSON.parse(raw);
    } catch {
      throw new CliError(`standard input line ${line} is not JSON (expected a JSON string)`);
    }
    if (typeof text !== "string") throw new CliError(`standard input line ${line} is not a JSON string`);
    yield text;
  }
}

/** parseArgs option spec of --override-kv, for the commands that load a model without placing it. */
export const metadataOverrideParseOptions = { "override-kv": { type: "string", multiple: true } } as const;

export const metadataOverrideOptionHelp = `  --override-kv KEY=TYPE:VALUE  a metadata value instead of the file's (llama.cpp's flag; TYPE int, float,
                           bool or str; repeatable), e.g. qwen3.rope.freq_base=float:500000`;

/** --override-kv as loadModel's options (none when the flag is absent). */
export function metadataOverrideOptions(values: { readonly "override-kv"?: readonly string[] | undefined }): { metadataOverrides?: MetadataOverride[] } {
  const overrides = (values["override-kv"] ?? []).map(parseMetadataOverride);
  return overrides.length > 0 ? { metadataOverrides: overrides } : {};
}

/** The KV cache types memra stores (--kv-type; llama.cpp's -ctk/-ctv when both are the same). */
export const KV_TYPES: readonly KVType[] = ["f16", "f32", "q8_0"];

/** --kv-type's value, or a CliError naming the types. */
export function parseKVType(value: string | undefined): KVType {
  const type = (value ?? "f16") as KVType;
  if (!KV_TYPES.includes(type)) throw new CliError(`--kv-type must be one of ${KV_TYPES.join(", ")}, got "${value}"`);
  return type;
}
