import { statSync } from "node:fs";
import { GGMLType, ggmlTypeInfo, ggmlTypeName } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import { GGUFFile, type GGUFFileParts, type GGUFTensorInfo } from "./gguf-file";
import {
  type GGUFArrayItems,
  type GGUFArrayValue,
  type GGUFValue,
  type GGUFValueTypeName,
  GGUFValueType,
  SCALAR_BYTES,
  VALUE_TYPE_NAMES,
} from "./gguf-value";
import { DEFAULT_WINDOW_BYTES, MAX_MAPPING_BYTES, MappedContents, checkMappingBytes, mapFileRange, planMappingWindows } from "./mapped-contents";

/** "GGUF" read as a little-endian uint32. */
export const GGUF_MAGIC = 0x46554747;
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_DIMS: a tensor has at most four dimensions. */
export const GGUF_MAX_DIMS = 4;
/** ggml's GGML_MAX_NAME: tensor names are shorter than 64 bytes. */
export const GGUF_MAX_TENSOR_NAME_BYTES = 63;
/** Arrays of arrays are allowed, but not nested deeper than this (a guard against stack exhaustion). */
export const GGUF_MAX_ARRAY_DEPTH = 8;

// The smallest encodings, used to bound counts before allocating: a string is at least its
// 8-byte length, a key/value pair at least key length + type + 1 byte, a tensor info at least
// name length + n_dims + type + offset, a nested array at least its type and count.
const MIN_STRING_BYTES = 8;
const MIN_KV_BYTES = 8 + 4 + 1;
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8;
const MIN_ARRAY_BYTES = 4 + 8;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export interface ReadGGUFOptions {
  /** Tensor data are views into `bytes`: the caller keeps them alive. Always true; here for clarity. */
  readonly path?: string;
}

export interface OpenGGUFOptions {
  /**
   * A file larger than this is mapped in windows of at most this many bytes of tensor data (each
   * tensor in one window); a smaller one is mapped whole. Default 2 GiB; at most 4 GiB - 1.
   */
  readonly windowBytes?: number;
  /** For a file mapped in windows: the first guess at the header's size, mapped and grown until it holds the header. Default 64 MiB. */
  readonly headerBytes?: number;
}

/** The first guess at the bytes that hold a windowed file's metadata and tensor infos (a Qwen3 vocabulary takes about 8 MB). */
export const DEFAULT_HEADER_BYTES = 64 * 2 ** 20;

/** A parsed header: everything of a GGUFFile but its bytes. */
export type ParsedGGUFHeader = Omit<GGUFFileParts, "header" | "contents" | "path">;

/**
 * Parses a whole GGUF file held in memory (or memory-mapped). Metadata and tensor infos are
 * decoded; tensor data stay in `bytes` and are handed out as zero-copy views.
 * Throws `GGUFError` naming the field and byte offset of the first problem.
 */
export function readGGUF(bytes: Uint8Array, options: ReadGGUFOptions = {}): GGUFFile {
  return new GGUFFile({ ...new GGUFParser(bytes, bytes.byteLength).parse(), header: bytes, path: options.path });
}

/**
 * Opens a GGUF file by memory-mapping it (`Bun.mmap`): only the header is touched, so opening a
 * large model and listing its tensors costs milliseconds, not a read of the file. A file of up to
 * `windowBytes` (2 GiB) is mapped whole; a larger one (one ArrayBuffer cannot hold 4 GiB) has its
 * header mapped, then its tensor data in windows of up to `windowBytes` split between tensors, each
 * window mapped when a tensor in it is first asked for. `tensorData` of a tensor of 4 GiB or more
 * throws GGUFError.
 */
export function openGGUF(path: string, options: OpenGGUFOptions = {}): GGUFFile {
  const { windowBytes = DEFAULT_WINDOW_BYTES, headerBytes = DEFAULT_HEADER_BYTES } = options;
  checkMappingBytes("windowBytes", windowBytes);
  checkMappingBytes("headerBytes", headerBytes);
  let size: number;
  try {
    size = statSync(path).size;
  } catch (error) {
    throw new GGUFError("file", -1, `cannot open ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (size <= windowBytes) {
    const bytes = mapWhole(path);
    return new GGUFFile({ ...new GGUFParser(bytes, bytes.byteLength).parse(), header: bytes, path });
  }
  const { header, parsed } = parseGGUFHeader(size, (length) => mapFileRange(path, 0, length), headerBytes);
  const contents = new MappedContents(path, size, planMappingWindows(parsed.tensors, parsed.dataOffset, windowBytes));
  return new GGUFFile({ ...parsed, header, contents, path });
}

function mapWhole(path: string): Uint8Array {
  try {
    return Bun.mmap(path, { shared: false });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    // An empty file cannot be mapped; report it as the truncation it is.
    if (/EINVAL|invalid argument/i.test(reason)) throw new GGUFError("magic", 0, "file is empty or cannot be mapped");
    throw new GGUFError("file", -1, `cannot open ${path}: ${reason}`);
  }
}

/**
 * Parses the header of a file of `fileBytes` bytes of which only a prefix is at hand:
 * `mapPrefix(length)` gives its first `length` bytes, first `firstGuess` of them, then, whenever
 * the header reaches past them, at least twice as many. Errors are those `readGGUF` gives for the
 * whole file. Returns the prefix that held the header and the parsed header.
 */
export function parseGGUFHeader(fileBytes: number, mapPrefix: (length: number) => Uint8Array, firstGuess: number): { header: Uint8Array; parsed: ParsedGGUFHeader } {
  let length = Math.min(fileBytes, MAX_MAPPING_BYTES, Math.max(1, firstGuess));
  for (;;) {
    const header = mapPrefix(length);
    try {
      return { header, parsed: new GGUFParser(header, fileBytes).parse() };
    } catch (error) {
      if (!(error instanceof BeyondPrefix)) throw error;
      if (error.end > MAX_MAPPING_BYTES) {
        throw new GGUFError(error.field, error.offset, `the header reaches byte ${error.end}: metadata and tensor infos of 4 GiB or more cannot be memory-mapped`);
      }
      length = Math.min(fileBytes, MAX_MAPPING_BYTES, Math.max(2 * length, error.end));
    }
  }
}

/** Thrown by the parser when the header goes on past the prefix it was given (but not past the file). */
class BeyondPrefix extends Error {
  constructor(
    readonly field: string,
    readonly offset: number,
    /** The end of the bytes the parser needs. */
    readonly end: number,
  ) {
    super(`${field} at byte ${offset}: needs bytes up to ${end}, past the mapped prefix`);
  }
}

/**
 * Reads a header from `bytes`, the first bytes of a file of `fileBytes` bytes: every check is
 * against the file, and a read past `bytes` within the file throws BeyondPrefix.
 */
class GGUFParser {
  private readonly view: DataView;
  private position = 0;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly fileBytes: number,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  parse(): ParsedGGUFHeader {
    const magic = this.uint32("magic");
    if (magic !== GGUF_MAGIC) {
      throw new GGUFError("magic", 0, `not a GGUF file (magic 0x${magic.toString(16).padStart(8, "0")}, expected "GGUF")`);
    }
    const version = this.uint32("version");
    if (version === 1) throw new GGUFError("version", 4, "GGUF v1 is not supported (v2 and v3 are)");
    if (version !== 2 && version !== 3) {
      const swapped = ((version & 0xff) << 24) | ((version & 0xff00) << 8) | ((version >>> 8) & 0xff00) | (version >>> 24);
      if (swapped === 2 || swapped === 3) throw new GGUFError("version", 4, "big-endian GGUF files are not supported");
      throw new GGUFError("version", 4, `unsupported GGUF version ${version} (v2 and v3 are supported)`);
    }

    const tensorCount = this.count("tensor_count", MIN_TENSOR_INFO_BYTES);
    const kvCount = this.count("metadata_kv_count", MIN_KV_BYTES);

    const metadata = new Map<string, GGUFValue>();
    let alignmentOffset = 0;
    for (let i = 0; i < kvCount; i++) {
      const keyOffset = this.position;
      const key = this.string(`kv[${i}].key`);
      if (key.length === 0) throw new GGUFError(`kv[${i}].key`, keyOffset, "empty key");
      if (metadata.has(key)) throw new GGUFError(`kv[${i}].key`, keyOffset, `duplicate key "${key}"`);
      if (key === "general.alignment") alignmentOffset = keyOffset;
      const typeOffset = this.position;
      const type = this.valueTypeName(`kv["${key}"].type`);
      metadata.set(key, this.value(`kv["${key}"]`, type, typeOffset, 0));
    }

    let alignment = GGUF_DEFAULT_ALIGNMENT;
    const alignmentValue = metadata.get("general.alignment");
    if (alignmentValue !== undefined) {
      if (alignmentValue.type !== "uint32") {
        throw new GGUFError('kv["general.alignment"]', alignmentOffset, `must be uint32, found ${alignmentValue.type}`);
      }
      alignment = alignmentValue.value;
      if (alignment === 0 || (alignment & (alignment - 1)) !== 0) {
        throw new GGUFError('kv["general.alignment"]', alignmentOffset, `must be a non-zero power of two, found ${alignment}`);
      }
    }

    const infos: Array<Omit<GGUFTensorInfo, "byteSize"> & { byteSize: number; infoOffset: number }> = [];
    const names = new Set<string>();
    for (let i = 0; i < tensorCount; i++) {
      const infoOffset = this.position;
      const field = `tensor_infos[${i}]`;
      const name = this.string(`${field}.name`);
      const nameBytes = this.position - infoOffset - 8;
      if (nameBytes > GGUF_MAX_TENSOR_NAME_BYTES) {
        throw new GGUFError(`${field}.name`, infoOffset, `tensor name is ${nameBytes} bytes, at most ${GGUF_MAX_TENSOR_NAME_BYTES} allowed`);
      }
      if (names.has(name)) throw new GGUFError(`${field}.name`, infoOffset, `duplicate tensor name "${name}"`);
      names.add(name);
      const dimsOffset = this.position;
      const dimCount = this.uint32(`${field}.n_dimensions`);
      if (dimCount > GGUF_MAX_DIMS) {
        throw new GGUFError(`${field}.n_dimensions`, dimsOffset, `${dimCount} dimensions, at most ${GGUF_MAX_DIMS} allowed ("${name}")`);
      }
      const shape: number[] = [];
      let elements = 1n;
      for (let d = 0; d < dimCount; d++) {
        const dimOffset = this.position;
        const dim = this.int64(`${field}.dimensions[${d}]`);
        if (dim < 0n) throw new GGUFError(`${field}.dimensions[${d}]`, dimOffset, `negative dimension ${dim} ("${name}")`);
        elements *= dim;
        // Each dimension too, not only the product: after a zero dimension the product stays 0.
        if (elements > BigInt(Number.MAX_SAFE_INTEGER) || dim > BigInt(Number.MAX_SAFE_INTEGER)) {
          throw new GGUFError(`${field}.dimensions[${d}]`, dimOffset, `element count overflows ("${name}")`);
        }
        shape.push(Number(dim));
      }
      const typeOffset = this.position;
      const typeId = this.uint32(`${field}.type`);
      const typeInfo = ggmlTypeInfo(typeId);
      if (!typeInfo) throw new GGUFError(`${field}.type`, typeOffset, `unknown ggml type ${typeId} ("${name}")`);
      const inner = shape[0] ?? 1;
      if (inner % typeInfo.blockSize !== 0) {
        throw new GGUFError(
          `${field}.dimensions[0]`,
          dimsOffset + 4,
          `${inner} is not a multiple of the ${typeInfo.name} block size ${typeInfo.blockSize} ("${name}")`,
        );
      }
      const offsetOffset = this.position;
      const offset = this.uint64(`${field}.offset`);
      if (offset > BigInt(Number.MAX_SAFE_INTEGER)) throw new GGUFError(`${field}.offset`, offsetOffset, `offset ${offset} is out of range ("${name}")`);
      if (offset % BigInt(alignment) !== 0n) {
        throw new GGUFError(`${field}.offset`, offsetOffset, `offset ${offset} is not a multiple of the alignment ${alignment} ("${name}")`);
      }
      const byteSize = (Number(elements) / typeInfo.blockSize) * typeInfo.bytesPerBlock;
      infos.push({
        name,
        type: typeId as GGMLType,
        shape,
        elementCount: Number(elements),
        offset: Number(offset),
        byteSize,
        infoOffset,
      });
    }

    const dataOffset = alignUp(this.position, alignment);
    const dataSize = Math.max(0, this.fileBytes - dataOffset);
    if (infos.length > 0 && dataOffset > this.fileBytes) {
      throw new GGUFError("tensor_data", this.position, `file ends before the data section (needs padding to byte ${dataOffset})`);
    }
    for (const info of infos) {
      if (info.offset + info.byteSize > dataSize) {
        throw new GGUFError(
          `tensor "${info.name}".offset`,
          info.infoOffset,
          `data [${info.offset}, ${info.offset + info.byteSize}) of ${ggmlTypeName(info.type)} tensor lies past the end of the data section (${dataSize} bytes)`,
        );
      }
    }
    const byOffset = [...infos].sort((a, b) => a.offset - b.offset);
    for (let i = 1; i < byOffset.length; i++) {
      const previous = byOffset[i - 1]!;
      const current = byOffset[i]!;
      if (current.offset < previous.offset + previous.byteSize) {
        throw new GGUFError(
          `tensor "${current.name}".offset`,
          current.infoOffset,
          `data overlaps tensor "${previous.name}" ([${current.offset}, ...) starts before ${previous.offset + previous.byteSize})`,
        );
      }
    }

    const tensors: GGUFTensorInfo[] = infos.map(({ infoOffset: _ignored, ...info }) => info);
    return { version, alignment, metadata, tensors, dataOffset };
  }

  // ---- primitive reads, each bounds-checked ----

  /** Checks that `bytes` bytes from here are in the file, then that they are in the prefix at hand. */
  private need(field: string, bytes: number): void {
    if (this.position + bytes > this.fileBytes) {
      throw new GGUFError(field, this.position, `file is truncated (needs ${bytes} bytes, ${this.fileBytes - this.position} remain)`);
    }
    if (this.position + bytes > this.bytes.byteLength) throw new BeyondPrefix(field, this.position, this.position + bytes);
  }

  /** Bytes that remain in the file. */
  private remaining(): number {
    return this.fileBytes - this.position;
  }

  private uint32(field: string): number {
    this.need(field, 4);
    const value = this.view.getUint32(this.position, true);
    this.position += 4;
    return value;
  }

  private uint64(field: string): bigint {
    this.need(field, 8);
    const value = this.view.getBigUint64(this.position, true);
    this.position += 8;
    return value;
  }

  private int64(field: string): bigint {
    this.need(field, 8);
    const value = this.view.getBigInt64(this.position, true);
    this.position += 8;
    return value;
  }

  /** A uint64 count, checked against the bytes that remain given the smallest encoding of one item. */
  private count(field: string, minItemBytes: number): number {
    const offset = this.position;
    const value = this.uint64(field);
    if (value * BigInt(minItemBytes) > BigInt(this.remaining())) {
      throw new GGUFError(field, offset, `count ${value} cannot fit in the ${this.remaining()} bytes that remain`);
    }
    return Number(value);
  }

  private string(field: string): string {
    const offset = this.position;
    const length = this.uint64(`${field}.length`);
    if (length > BigInt(this.remaining())) {
      throw new GGUFError(field, offset, `string length ${length} exceeds the ${this.remaining()} bytes that remain`);
    }
    this.need(field, Number(length));
    const start = this.position;
    const end = start + Number(length);
    this.position = end;
    return decodeUtf8(this.bytes, start, end, field, offset);
  }

  private valueTypeName(field: string): GGUFValueTypeName {
    const offset = this.position;
    const id = this.uint32(field);
    const name = VALUE_TYPE_NAMES[id as GGUFValueType];
    if (name === undefined) throw new GGUFError(field, offset, `unknown metadata value type ${id}`);
    return name;
  }

  private value(field: string, type: GGUFValueTypeName, typeOffset: number, depth: number): GGUFValue {
    const offset = this.position;
    switch (type) {
      case "string":
        return { type, value: this.string(`${field}.value`) };
      case "array":
        return this.array(field, typeOffset, depth);
      case "bool": {
        this.need(`${field}.value`, 1);
        const byte = this.bytes[this.position++]!;
        if (byte > 1) throw new GGUFError(`${field}.value`, offset, `bool must be 0 or 1, found ${byte}`);
        return { type, value: byte === 1 };
      }
      case "uint64":
        return { type, value: this.uint64(`${field}.value`) };
      case "int64":
        return { type, value: this.int64(`${field}.value`) };
      default: {
        const size = SCALAR_BYTES[type]!;
        this.need(`${field}.value`, size);
        const value = readNumber(this.view, this.position, type);
        this.position += size;
        return { type, value };
      }
    }
  }

  private array(field: string, typeOffset: number, depth: number): GGUFArrayValue {
    if (depth >= GGUF_MAX_ARRAY_DEPTH) {
      throw new GGUFError(field, typeOffset, `arrays nested deeper than ${GGUF_MAX_ARRAY_DEPTH} levels`);
    }
    const itemType = this.valueTypeName(`${field}.item_type`);
    const scalarBytes = SCALAR_BYTES[itemType];
    const minItemBytes = scalarBytes ?? (itemType === "string" ? MIN_STRING_BYTES : MIN_ARRAY_BYTES);
    const count = this.count(`${field}.count`, minItemBytes);
    // Scalars are read straight from the bytes: within the file after `count`, but maybe not yet mapped.
    if (scalarBytes !== undefined) this.need(`${field}.count`, count * scalarBytes);
    const start = this.position;
    let items: GGUFArrayItems;
    switch (itemType) {
      case "string":
        items = this.stringArray(field, count);
        break;
      case "array": {
        const arrays = new Array<GGUFArrayValue>(count);
        for (let i = 0; i < count; i++) {
          const nestedTypeOffset = this.position;
          arrays[i] = this.array(`${field}[${i}]`, nestedTypeOffset, depth + 1);
        }
        items = arrays;
        break;
      }
      case "bool": {
        const bools = new Array<boolean>(count);
        for (let i = 0; i < count; i++) {
          const byte = this.bytes[start + i]!;
          if (byte > 1) throw new GGUFError(`${field}[${i}]`, start + i, `bool must be 0 or 1, found ${byte}`);
          bools[i] = byte === 1;
        }
        this.position += count;
        items = bools;
        break;
      }
      default: {
        items = copyNumericArray(this.bytes, start, count, itemType);
        this.position += count * scalarBytes!;
      }
    }
    return { type: "array", itemType, items };
  }

  /**
   * The items of a string array. Vocabularies hold 150k+ strings, and one decoder call per string
   * dominated opening a model, so the strings are bounds-checked and gathered first, decoded in
   * one call and sliced. Any problem falls back to `stringsOneByOne`, which reports it precisely.
   */
  private stringArray(field: string, count: number): string[] {
    const { bytes, view } = this;
    const first = this.position;
    // Pass 1: every length within the file, no string starting with a UTF-8 continuation byte
    // (so that, when the concatenation is valid UTF-8, each string is valid on its own).
    let position = first;
    let total = 0;
    for (let i = 0; i < count; i++) {
      if (position + 8 > bytes.byteLength) return this.stringsOneByOne(field, count, first);
      const length = view.getUint32(position, true);
      position += 8;
      if (view.getUint32(position - 4, true) !== 0 || length > bytes.byteLength - position) return this.stringsOneByOne(field, count, first);
      if (length > 0 && (bytes[position]! & 0xc0) === 0x80) return this.stringsOneByOne(field, count, first);
      total += length;
      position += length;
    }
    // Pass 2: gather the bytes (bounded by what the file holds) and count the UTF-16 code units
    // each string decodes to: one per non-continuation byte, two for a 4-byte sequence.
    const joined = new Uint8Array(total);
    const ends: number[] = [];
    let units = 0;
    let at = 0;
    position = first;
    for (let i = 0; i < count; i++) {
      const end = position + 8 + view.getUint32(position, true);
      for (let j = position + 8; j < end; j++) {
        const byte = bytes[j]!;
        joined[at++] = byte;
        if ((byte & 0xc0) !== 0x80) units += byte >= 0xf0 ? 2 : 1;
      }
      ends.push(units);
      position = end;
    }
    let text: string;
    try {
      text = utf8.decode(joined);
    } catch {
      return this.stringsOneByOne(field, count, first);
    }
    if (text.length !== units) return this.stringsOneByOne(field, count, first);
    const strings = new Array<string>(count);
    let start = 0;
    for (let i = 0; i < count; i++) {
      strings[i] = text.slice(start, ends[i]!);
      start = ends[i]!;
    }
    this.position = position;
    return strings;
  }

  private stringsOneByOne(field: string, count: number, first: number): string[] {
    this.position = first;
    const strings = new Array<string>(count);
    for (let i = 0; i < count; i++) strings[i] = this.string(`${field}[${i}]`);
    return strings;
  }
}

function readNumber(view: DataView, at: number, type: GGUFValueTypeName): number {
  switch (type) {
    case "uint8":
      return view.getUint8(at);
    case "int8":
      return view.getInt8(at);
    case "uint16":
      return view.getUint16(at, true);
    case "int16":
      return view.getInt16(at, true);
    case "uint32":
      return view.getUint32(at, true);
    case "int32":
      return view.getInt32(at, true);
    case "float32":
      return view.getFloat32(at, true);
    case "float64":
      return view.getFloat64(at, true);
    default:
      throw new Error(`not a plain number type: ${type}`);
  }
}

const TYPED_ARRAYS = {
  uint8: Uint8Array,
  int8: Int8Array,
  uint16: Uint16Array,
  int16: Int16Array,
  uint32: Uint32Array,
  int32: Int32Array,
  float32: Float32Array,
  float64: Float64Array,
  uint64: BigUint64Array,
  int64: BigInt64Array,
} as const;

/** Copies `count` little-endian numbers into a fresh (aligned) typed array. */
function copyNumericArray(bytes: Uint8Array, start: number, count: number, type: GGUFValueTypeName): GGUFArrayItems {
  const Constructor = TYPED_ARRAYS[type as keyof typeof TYPED_ARRAYS];
  const size = SCALAR_BYTES[type]!;
  // Not bytes.slice: a Node Buffer's slice is a view, and its `.buffer` starts elsewhere.
  const copy = new Uint8Array(count * size);
  copy.set(bytes.subarray(start, start + count * size));
  return new Constructor(copy.buffer, 0, count);
}

function decodeUtf8(bytes: Uint8Array, start: number, end: number, field: string, offset: number): string {
  // Fast path for ASCII, which most keys and many token strings are.
  if (end - start < 64) {
    let ascii = true;
    for (let i = start; i < end; i++) {
      if (bytes[i]! >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
  }
  try {
    return utf8.decode(bytes.subarray(start, end));
  } catch {
    throw new GGUFError(field, offset, "string is not valid UTF-8");
  }
}

export function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}
