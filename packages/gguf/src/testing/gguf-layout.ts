/**
 * Test helpers for fuzzing the GGUF reader: a seeded PRNG and an independent walker that maps a
 * known-good GGUF file to the byte regions of its fields, named the way `readGGUF` names them in
 * its errors. Not exported from the package.
 */
import { SCALAR_BYTES, VALUE_TYPE_NAMES, type GGUFValueType, type GGUFValueTypeName } from "../gguf-value";
import { ggmlTypeInfo } from "../ggml-type";

/** mulberry32: a tiny, deterministic 32-bit PRNG. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 2^32). */
  uint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.uint32() / 2 ** 32) * n);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("pick from an empty list");
    return items[this.int(items.length)]!;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.uint32() & 0xff;
    return out;
  }
}

export type RegionKind =
  | "magic"
  | "version"
  /** A uint64 item count, checked against the remaining bytes (`minItemBytes` per item). */
  | "count"
  /** The uint64 length of a string. */
  | "length"
  /** The UTF-8 bytes of a string. */
  | "bytes"
  | "value_type"
  | "scalar"
  | "bool"
  | "n_dims"
  | "dim"
  | "ggml_type"
  | "tensor_offset"
  | "padding"
  | "tensor_data";

export interface Region {
  readonly kind: RegionKind;
  /** The field name `readGGUF` reports for a problem with this region's value. */
  readonly field: string;
  /** The field name reported when the file ends inside this region. */
  readonly truncatedField: string;
  readonly start: number;
  readonly end: number;
  /** For counts and lengths: where the items they count end. */
  readonly extentEnd?: number;
  /** For counts: the smallest encoding of one item, in bytes. */
  readonly minItemBytes?: number;
  /** For value types: the type name found there. */
  readonly valueType?: GGUFValueTypeName;
  /** For tensor regions: the tensor's index. */
  readonly tensor?: number;
}

export interface TensorLayout {
  readonly name: string;
  readonly infoStart: number;
  readonly offset: number;
  readonly size: number;
}

export interface GGUFLayout {
  readonly regions: Region[];
  readonly keys: string[];
  readonly tensors: TensorLayout[];
  readonly alignment: number;
  /** End of the tensor infos (before padding). */
  readonly headerEnd: number;
  readonly dataOffset: number;
  /** The shortest prefix of the file that still parses. */
  readonly minValidLength: number;
}

const MIN_ITEM_BYTES: Partial<Record<GGUFValueTypeName, number>> = { string: 8, array: 12 };

/**
 * Walks a GGUF file that is known to be valid (trusting every count) and returns its regions.
 * Deliberately written apart from `readGGUF`, so that the two cross-check each other.
 */
export function ggufLayout(bytes: Uint8Array): GGUFLayout {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const regions: Region[] = [];
  let pos = 0;
  const decoder = new TextDecoder("utf-8", { fatal: true });

  const take = (kind: RegionKind, field: string, size: number, extra: Partial<Region> = {}, truncatedField = field): void => {
    regions.push({ kind, field, truncatedField, start: pos, end: pos + size, ...extra });
    pos += size;
  };
  const u32 = (): number => view.getUint32(pos, true);
  const u64 = (): number => Number(view.getBigUint64(pos, true));

  const string = (field: string): string => {
    const length = u64();
    take("length", field, 8, { extentEnd: pos + 8 + length }, `${field}.length`);
    const text = decoder.decode(bytes.subarray(pos, pos + length));
    take("bytes", field, length);
    return text;
  };

  const scalar = (field: string, type: GGUFValueTypeName): unknown => {
    if (type === "bool") {
      const value = bytes[pos] === 1;
      take("bool", field, 1);
      return value;
    }
    const size = SCALAR_BYTES[type]!;
    const value = type === "uint32" ? u32() : undefined;
    take("scalar", field, size);
    return value;
  };

  const array = (field: string): void => {
    const itemType = VALUE_TYPE_NAMES[u32() as GGUFValueType];
    take("value_type", `${field}.item_type`, 4, { valueType: itemType });
    const count = u64();
    const countRegion = regions.length;
    const minItemBytes = SCALAR_BYTES[itemType] ?? MIN_ITEM_BYTES[itemType]!;
    take("count", `${field}.count`, 8, { minItemBytes });
    for (let i = 0; i < count; i++) {
      const item = `${field}[${i}]`;
      if (itemType === "string") string(item);
      else if (itemType === "array") array(item);
      else scalar(item, itemType);
    }
    regions[countRegion] = { ...regions[countRegion]!, extentEnd: pos };
  };

  take("magic", "magic", 4);
  take("version", "version", 4);
  const tensorCount = u64();
  const tensorCountRegion = regions.length;
  take("count", "tensor_count", 8, { minItemBytes: 8 + 4 + 4 + 8 });
  const kvCount = u64();
  const kvCountRegion = regions.length;
  take("count", "metadata_kv_count", 8, { minItemBytes: 8 + 4 + 1 });

  const keys: string[] = [];
  let alignment = 32;
  for (let i = 0; i < kvCount; i++) {
    const key = string(`kv[${i}].key`);
    keys.push(key);
    const type = VALUE_TYPE_NAMES[u32() as GGUFValueType];
    take("value_type", `kv["${key}"].type`, 4, { valueType: type });
    if (type === "array") array(`kv["${key}"]`);
    else if (type === "string") string(`kv["${key}"].value`);
    else {
      const value = scalar(`kv["${key}"].value`, type);
      if (key === "general.alignment" && typeof value === "number") alignment = value;
    }
  }
  regions[kvCountRegion] = { ...regions[kvCountRegion]!, extentEnd: pos };

  const tensors: TensorLayout[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const field = `tensor_infos[${i}]`;
    const infoStart = pos;
    const name = string(`${field}.name`);
    const dims = u32();
    take("n_dims", `${field}.n_dimensions`, 4, { tensor: i });
    const shape: number[] = [];
    for (let d = 0; d < dims; d++) {
      shape.push(u64());
      take("dim", `${field}.dimensions[${d}]`, 8, { tensor: i });
    }
    const type = ggmlTypeInfo(u32());
    if (!type) throw new Error(`ggufLayout: bad type in ${field}`);
    take("ggml_type", `${field}.type`, 4, { tensor: i });
    const offset = u64();
    take("tensor_offset", `${field}.offset`, 8, { tensor: i });
    const elements = shape.reduce((a, b) => a * b, 1);
    tensors.push({ name, infoStart, offset, size: (elements / type.blockSize) * type.bytesPerBlock });
  }
  regions[tensorCountRegion] = { ...regions[tensorCountRegion]!, extentEnd: pos };

  const headerEnd = pos;
  const dataOffset = Math.ceil(headerEnd / alignment) * alignment;
  if (dataOffset > headerEnd) take("padding", "tensor_data", dataOffset - headerEnd);
  let minValidLength = headerEnd;
  if (tensors.length > 0) {
    minValidLength = dataOffset;
    tensors.forEach((t, i) => {
      regions.push({
        kind: "tensor_data",
        field: `tensor "${t.name}".offset`,
        truncatedField: `tensor "${t.name}".offset`,
        start: dataOffset + t.offset,
        end: dataOffset + t.offset + t.size,
        tensor: i,
      });
      minValidLength = Math.max(minValidLength, dataOffset + t.offset + t.size);
    });
  }
  return { regions, keys, tensors, alignment, headerEnd, dataOffset, minValidLength };
}

export function patchUint32(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const copy = bytes.slice();
  new DataView(copy.buffer).setUint32(at, value >>> 0, true);
  return copy;
}

export function patchUint64(bytes: Uint8Array, at: number, value: bigint): Uint8Array {
  const copy = bytes.slice();
  new DataView(copy.buffer).setBigUint64(at, BigInt.asUintN(64, value), true);
  return copy;
}

export function patchBytes(bytes: Uint8Array, at: number, patch: ArrayLike<number>): Uint8Array {
  const copy = bytes.slice();
  copy.set(patch, at);
  return copy;
}

/** Little-endian byte concatenation for hand-built (malformed) files. */
export class RawWriter {
  private readonly parts: number[] = [];

  u8(value: number): this {
    this.parts.push(value & 0xff);
    return this;
  }

  u32(value: number): this {
    for (let i = 0; i < 4; i++) this.parts.push((value >>> (8 * i)) & 0xff);
    return this;
  }

  u64(value: bigint | number): this {
    let v = BigInt.asUintN(64, BigInt(value));
    for (let i = 0; i < 8; i++) {
      this.parts.push(Number(v & 0xffn));
      v >>= 8n;
    }
    return this;
  }

  raw(bytes: ArrayLike<number>): this {
    for (let i = 0; i < bytes.length; i++) this.parts.push(bytes[i]!);
    return this;
  }

  string(value: string): this {
    const encoded = new TextEncoder().encode(value);
    return this.u64(encoded.byteLength).raw(encoded);
  }

  /** Pads with zeros to a multiple of `alignment`. */
  pad(alignment: number): this {
    while (this.parts.length % alignment !== 0) this.parts.push(0);
    return this;
  }

  get length(): number {
    return this.parts.length;
  }

  bytes(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}
