/**
 * llama.cpp's `--override-kv KEY=TYPE:VALUE`: a metadata value given on the command line instead of
 * the file's (types int, float, bool and str; keys under 128 bytes, strings under 128).
 */
import type { GGUFFile } from "./gguf-file";
import type { GGUFValue } from "./gguf-value";

export interface MetadataOverride {
  readonly key: string;
  readonly type: "int" | "float" | "bool" | "str";
  readonly value: bigint | number | boolean | string;
}

/** A bad `--override-kv` or an override whose type does not fit the file's value: names the override. */
export class MetadataOverrideError extends Error {
  override readonly name = "MetadataOverrideError";
}

const utf8 = new TextEncoder();

/**
 * Parses KEY=TYPE:VALUE as llama.cpp's string_parse_kv_override does (int:, float:, bool:true|false,
 * str:), but refusing a number it would read as 0 or cut short ("int:12abc").
 */
export function parseMetadataOverride(spec: string): MetadataOverride {
  const at = spec.indexOf("=");
  if (at <= 0 || utf8.encode(spec.slice(0, at)).length >= 128) {
    throw new MetadataOverrideError(`malformed KV override "${spec}": expected KEY=TYPE:VALUE with a key under 128 bytes`);
  }
  const key = spec.slice(0, at);
  const rest = spec.slice(at + 1);
  const colon = rest.indexOf(":");
  const type = colon < 0 ? rest : rest.slice(0, colon);
  const text = colon < 0 ? "" : rest.slice(colon + 1);
  switch (type) {
    case "int":
      if (!/^[+-]?\d+$/.test(text.trim())) throw new MetadataOverrideError(`KV override "${spec}": "${text}" is not an integer`);
      return { key, type, value: BigInt(text.trim()) };
    case "float": {
      const value = Number(text.trim());
      if (text.trim() === "" || !Number.isFinite(value)) throw new MetadataOverrideError(`KV override "${spec}": "${text}" is not a number`);
      return { key, type, value };
    }
    case "bool":
      if (text !== "true" && text !== "false") throw new MetadataOverrideError(`KV override "${spec}": a bool is true or false, not "${text}"`);
      return { key, type, value: text === "true" };
    case "str":
      if (utf8.encode(text).length > 127) throw new MetadataOverrideError(`KV override "${spec}": the value cannot exceed 127 bytes`);
      return { key, type, value: text };
    default:
      throw new MetadataOverrideError(`KV override "${spec}": the type is int, float, bool or str, not "${type}"`);
  }
}

const INTEGER_TYPES = new Set(["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]);
const RANGES: Record<string, [bigint, bigint]> = {
  uint8: [0n, 255n], int8: [-128n, 127n], uint16: [0n, 65535n], int16: [-32768n, 32767n], uint32: [0n, 4294967295n],
  int32: [-2147483648n, 2147483647n], uint64: [0n, 18446744073709551615n], int64: [-9223372036854775808n, 9223372036854775807n],
};

/**
 * The file with its metadata overridden, as llama.cpp's loader reads an overridden key: an int
 * override of an integer key keeps the key's type (it must fit), a float one a float key's; a
 * new key is an int64, a float32, a bool or a string. Changes `file.metadata` in place and returns the file.
 *
 * @throws MetadataOverrideError when an override's type is not the key's (an int for a string key, say) or its value does not fit.
 */
export function applyMetadataOverrides(file: GGUFFile, overrides: readonly MetadataOverride[]): GGUFFile {
  for (const override of overrides) file.metadata.set(override.key, overriddenValue(file.metadata.get(override.key), override));
  return file;
}

function overriddenValue(existing: GGUFValue | undefined, o: MetadataOverride): GGUFValue {
  const mismatch = () => new MetadataOverrideError(`KV override ${o.key}: the file's value is a ${existing!.type}, the override a ${o.type}`);
  switch (o.type) {
    case "int": {
      const value = o.value as bigint;
      const type = existing === undefined ? "int64" : existing.type;
      if (!INTEGER_TYPES.has(type)) throw mismatch();
      const [low, high] = RANGES[type]!;
      if (value < low || value > high) throw new MetadataOverrideError(`KV override ${o.key}: ${value} does not fit the file's ${type}`);
      return (type === "uint64" || type === "int64" ? { type, value } : { type, value: Number(value) }) as GGUFValue;
    }
    case "float": {
      const type = existing === undefined ? "float32" : existing.type;
      if (type !== "float32" && type !== "float64") throw mismatch();
      return { type, value: o.value as number };
    }
    case "bool":
      if (existing !== undefined && existing.type !== "bool") throw mismatch();
      return { type: "bool", value: o.value as boolean };
    case "str":
      if (existing !== undefined && existing.type !== "string") throw mismatch();
      return { type: "string", value: o.value as string };
  }
}

/** llama-quantize's writing of an override into its output: float as float32, int as uint32 of its magnitude, bool, string. */
export function quantizeOverrideValue(o: MetadataOverride): GGUFValue {
  switch (o.type) {
    case "int": {
      const magnitude = (o.value as bigint) < 0n ? -(o.value as bigint) : (o.value as bigint);
      return { type: "uint32", value: Number(magnitude & 0xffffffffn) };
    }
    case "float":
      return { type: "float32", value: o.value as number };
    case "bool":
      return { type: "bool", value: o.value as boolean };
    case "str":
      return { type: "string", value: o.value as string };
  }
}
