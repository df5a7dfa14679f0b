/** GGUF metadata value types, with the ids the file format uses (gguf.md `gguf_metadata_value_type`). */
export enum GGUFValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type GGUFNumberTypeName = "uint8" | "int8" | "uint16" | "int16" | "uint32" | "int32" | "float32" | "float64";
export type GGUFBigIntTypeName = "uint64" | "int64";
export type GGUFScalarTypeName = GGUFNumberTypeName | GGUFBigIntTypeName | "bool" | "string";
export type GGUFValueTypeName = GGUFScalarTypeName | "array";

/** The items of a metadata array, stored compactly: numeric arrays are typed arrays. */
export type GGUFArrayItems =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array
  | boolean[]
  | string[]
  | GGUFArrayValue[];

export interface GGUFArrayValue {
  readonly type: "array";
  readonly itemType: GGUFValueTypeName;
  readonly items: GGUFArrayItems;
}

/** A metadata value together with its GGUF type, so that a file can be written back unchanged. */
export type GGUFValue =
  | { readonly type: GGUFNumberTypeName; readonly value: number }
  | { readonly type: GGUFBigIntTypeName; readonly value: bigint }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | GGUFArrayValue;

/** A plain JavaScript view of a value: numbers, bigints, booleans, strings, arrays of those. */
export type GGUFPlainValue = number | bigint | boolean | string | GGUFPlainValue[] | ArrayLike<number> | ArrayLike<bigint>;

export const VALUE_TYPE_NAMES: Record<GGUFValueType, GGUFValueTypeName> = {
  [GGUFValueType.UINT8]: "uint8",
  [GGUFValueType.INT8]: "int8",
  [GGUFValueType.UINT16]: "uint16",
  [GGUFValueType.INT16]: "int16",
  [GGUFValueType.UINT32]: "uint32",
  [GGUFValueType.INT32]: "int32",
  [GGUFValueType.FLOAT32]: "float32",
  [GGUFValueType.BOOL]: "bool",
  [GGUFValueType.STRING]: "string",
  [GGUFValueType.ARRAY]: "array",
  [GGUFValueType.UINT64]: "uint64",
  [GGUFValueType.INT64]: "int64",
  [GGUFValueType.FLOAT64]: "float64",
};

export const VALUE_TYPE_IDS: Record<GGUFValueTypeName, GGUFValueType> = Object.fromEntries(
  Object.entries(VALUE_TYPE_NAMES).map(([id, name]) => [name, Number(id)]),
) as Record<GGUFValueTypeName, GGUFValueType>;

/** Bytes of one fixed-size scalar; strings and arrays have variable size (undefined). */
export const SCALAR_BYTES: Partial<Record<GGUFValueTypeName, number>> = {
  uint8: 1,
  int8: 1,
  bool: 1,
  uint16: 2,
  int16: 2,
  uint32: 4,
  int32: 4,
  float32: 4,
  uint64: 8,
  int64: 8,
  float64: 8,
};

/** Constructors for typed metadata values, for building files to write. */
export const ggufValue = {
  uint8: (value: number): GGUFValue => ({ type: "uint8", value }),
  int8: (value: number): GGUFValue => ({ type: "int8", value }),
  uint16: (value: number): GGUFValue => ({ type: "uint16", value }),
  int16: (value: number): GGUFValue => ({ type: "int16", value }),
  uint32: (value: number): GGUFValue => ({ type: "uint32", value }),
  int32: (value: number): GGUFValue => ({ type: "int32", value }),
  float32: (value: number): GGUFValue => ({ type: "float32", value }),
  float64: (value: number): GGUFValue => ({ type: "float64", value }),
  uint64: (value: bigint | number): GGUFValue => ({ type: "uint64", value: BigInt(value) }),
  int64: (value: bigint | number): GGUFValue => ({ type: "int64", value: BigInt(value) }),
  bool: (value: boolean): GGUFValue => ({ type: "bool", value }),
  string: (value: string): GGUFValue => ({ type: "string", value }),
  array: (itemType: GGUFValueTypeName, items: GGUFArrayItems): GGUFArrayValue => ({ type: "array", itemType, items }),
  stringArray: (items: string[]): GGUFArrayValue => ({ type: "array", itemType: "string", items }),
  int32Array: (items: ArrayLike<number>): GGUFArrayValue => ({ type: "array", itemType: "int32", items: Int32Array.from(items) }),
  float32Array: (items: ArrayLike<number>): GGUFArrayValue => ({ type: "array", itemType: "float32", items: Float32Array.from(items) }),
};

/** Strips the types off a value: arrays become plain arrays or typed arrays of their items. */
export function plainValue(value: GGUFValue): GGUFPlainValue {
  if (value.type !== "array") return value.value;
  if (value.itemType === "array") return (value.items as GGUFArrayValue[]).map(plainValue);
  return value.items as GGUFPlainValue;
}

/**
 * A JSON-safe rendering: typed arrays become arrays, 64-bit integers become numbers when they are
 * exactly representable and decimal strings otherwise.
 */
export function jsonValue(value: GGUFValue): unknown {
  if (value.type === "uint64" || value.type === "int64") return bigintToJson(value.value);
  if (value.type !== "array") return value.value;
  if (value.itemType === "array") return (value.items as GGUFArrayValue[]).map(jsonValue);
  if (value.itemType === "uint64" || value.itemType === "int64") {
    return Array.from(value.items as BigInt64Array | BigUint64Array, bigintToJson);
  }
  return Array.from(value.items as ArrayLike<unknown>);
}

function bigintToJson(v: bigint): number | string {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v.toString();
}
