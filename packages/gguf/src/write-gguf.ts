import { realpathSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { type GGMLType, ggmlTypeInfo, tensorByteSize } from "./ggml-type";
import { type GGUFArrayValue, type GGUFValue, type GGUFValueTypeName, SCALAR_BYTES, VALUE_TYPE_IDS } from "./gguf-value";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_MAX_DIMS, GGUF_MAX_TENSOR_NAME_BYTES, alignUp } from "./read-gguf";

export interface GGUFTensorToWrite {
  readonly name: string;
  readonly type: GGMLType;
  /** Innermost dimension first. */
  readonly shape: readonly number[];
  /**
   * The encoded bytes, or a function producing them when the writer gets to this tensor: all at
   * once, or in pieces (which writeGGUFFile writes one by one, so a tensor larger than memory can be
   * written). A piece is written before the next is asked for: a producer may reuse its memory.
   */
  readonly data: Uint8Array | (() => Uint8Array | Iterable<Uint8Array>);
}

export interface GGUFToWrite {
  /** 3 unless stated; 2 writes the same layout with the older version number. */
  readonly version?: 2 | 3;
  readonly metadata: ReadonlyMap<string, GGUFValue> | Readonly<Record<string, GGUFValue>>;
  readonly tensors?: readonly GGUFTensorToWrite[];
}

const utf8 = new TextEncoder();

/** Serialises a whole GGUF file into memory. */
export function writeGGUF(file: GGUFToWrite): Uint8Array {
  const { header, layout, dataBytes } = encodeGGUFHeader(file);
  const out = new Uint8Array(header.byteLength + dataBytes);
  out.set(header, 0);
  for (const { tensor, offset, size } of layout) {
    let at = header.byteLength + offset;
    for (const piece of tensorPieces(tensor, size)) {
      out.set(piece, at);
      at += piece.byteLength;
    }
  }
  return out;
}

/**
 * Writes a GGUF file to disk tensor by tensor, so that a model larger than memory can be written
 * when its tensors are given as functions. Returns the number of bytes written.
 */
export async function writeGGUFFile(path: string, file: GGUFToWrite): Promise<number> {
  const { header, layout, dataBytes } = encodeGGUFHeader(file);
  const writer = Bun.file(path).writer({ highWaterMark: 1 << 22 });
  writer.write(header);
  let written = 0;
  for (const { tensor, offset, size } of layout) {
    if (offset > written) writer.write(new Uint8Array(offset - written));
    for (const piece of tensorPieces(tensor, size)) {
      writer.write(piece);
      await writer.flush();
    }
    written = offset + size;
  }
  if (dataBytes > written) writer.write(new Uint8Array(dataBytes - written));
  await writer.end();
  return header.byteLength + dataBytes;
}

/**
 * writeGGUFFile under a temporary name beside `path`, renamed to `path` once complete: on an error
 * the temporary file is removed and a file already at `path` is left as it was.
 */
export async function writeGGUFFileComplete(path: string, file: GGUFToWrite): Promise<number> {
  const temporary = `${path}.partial-${process.pid}-${Date.now()}`;
  try {
    const bytes = await writeGGUFFile(temporary, file);
    renameSync(temporary, path);
    return bytes;
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

/** Whether two paths name the same file; `b` may not exist yet (its directory is compared then). */
export function sameFile(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    try {
      return join(realpathSync(dirname(resolve(b))), basename(b)) === realpathSync(a);
    } catch {
      return false;
    }
  }
}

/** A tensor's data in the pieces it is given in, checked to add up to `size` bytes (a piece too many is refused before it is written). */
function* tensorPieces(tensor: GGUFTensorToWrite, size: number): Generator<Uint8Array> {
  const data = typeof tensor.data === "function" ? tensor.data() : tensor.data;
  const mismatch = (given: string) => new RangeError(`tensor "${tensor.name}": ${given} bytes of data given, its type and shape need ${size}`);
  if (data instanceof Uint8Array) {
    if (data.byteLength !== size) throw mismatch(String(data.byteLength));
    yield data;
    return;
  }
  let total = 0;
  for (const piece of data) {
    total += piece.byteLength;
    if (total > size) throw mismatch(`at least ${total}`);
    yield piece;
  }
  if (total !== size) throw mismatch(String(total));
}

export interface TensorPlacement {
  tensor: GGUFTensorToWrite;
  offset: number;
  size: number;
}

/**
 * The header of `file` (metadata and tensor infos, padded to the alignment), where each tensor's
 * data go in the data section, and the data section's size. The tensors' data are not touched, so
 * a test can describe a file larger than memory and write only parts of it.
 */
export function encodeGGUFHeader(file: GGUFToWrite): { header: Uint8Array; layout: TensorPlacement[]; dataBytes: number } {
  const entries: Array<[string, GGUFValue]> =
    file.metadata instanceof Map ? [...file.metadata.entries()] : Object.entries(file.metadata as Record<string, GGUFValue>);
  const alignmentValue = entries.find(([key]) => key === "general.alignment")?.[1];
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  if (alignmentValue !== undefined) {
    if (alignmentValue.type !== "uint32" || alignmentValue.value === 0 || (alignmentValue.value & (alignmentValue.value - 1)) !== 0) {
      throw new RangeError("general.alignment must be a uint32 power of two");
    }
    alignment = alignmentValue.value;
  }

  const out = new ByteWriter();
  out.uint32(GGUF_MAGIC);
  out.uint32(file.version ?? 3);
  const tensors = file.tensors ?? [];
  out.uint64(BigInt(tensors.length));
  out.uint64(BigInt(entries.length));
  for (const [key, value] of entries) {
    out.string(key);
    out.uint32(VALUE_TYPE_IDS[value.type]);
    writeValue(out, value, key);
  }

  const layout: TensorPlacement[] = [];
  const names = new Set<string>();
  let offset = 0;
  for (const tensor of tensors) {
    if (names.has(tensor.name)) throw new RangeError(`duplicate tensor name "${tensor.name}"`);
    names.add(tensor.name);
    if (utf8.encode(tensor.name).byteLength > GGUF_MAX_TENSOR_NAME_BYTES) {
      throw new RangeError(`tensor name "${tensor.name}" is longer than ${GGUF_MAX_TENSOR_NAME_BYTES} bytes`);
    }
    if (tensor.shape.length > GGUF_MAX_DIMS) throw new RangeError(`tensor "${tensor.name}" has more than ${GGUF_MAX_DIMS} dimensions`);
    const info = ggmlTypeInfo(tensor.type);
    if (!info) throw new RangeError(`tensor "${tensor.name}": unknown ggml type ${tensor.type}`);
    const size = tensorByteSize(tensor.type, tensor.shape);
    if (size === undefined) {
      throw new RangeError(`tensor "${tensor.name}": dimension ${tensor.shape[0]} is not a multiple of the ${info.name} block size ${info.blockSize}`);
    }
    out.string(tensor.name);
    out.uint32(tensor.shape.length);
    for (const dim of tensor.shape) out.uint64(BigInt(dim));
    out.uint32(tensor.type);
    out.uint64(BigInt(offset));
    layout.push({ tensor, offset, size: Number(size) });
    offset = alignUp(offset + Number(size), alignment);
  }
  out.pad(alignment);
  return { header: out.bytes(), layout, dataBytes: offset };
}

function writeValue(out: ByteWriter, value: GGUFValue, key: string): void {
  switch (value.type) {
    case "string":
      out.string(value.value);
      return;
    case "bool":
      out.uint8(value.value ? 1 : 0);
      return;
    case "uint64":
      out.uint64(value.value);
      return;
    case "int64":
      out.int64(value.value);
      return;
    case "array":
      writeArray(out, value, key);
      return;
    default:
      out.number(value.type, value.value);
  }
}

function writeArray(out: ByteWriter, array: GGUFArrayValue, key: string): void {
  out.uint32(VALUE_TYPE_IDS[array.itemType]);
  out.uint64(BigInt(array.items.length));
  switch (array.itemType) {
    case "string":
      for (const item of array.items as string[]) out.string(item);
      return;
    case "array":
      // A nested array is its item type, count and items, with no type tag of its own (gguf-py `_pack_val`).
      for (const item of array.items as GGUFArrayValue[]) writeArray(out, item, key);
      return;
    case "bool":
      for (const item of array.items as boolean[]) out.uint8(item ? 1 : 0);
      return;
    case "uint64":
      for (const item of array.items as BigUint64Array) out.uint64(item);
      return;
    case "int64":
      for (const item of array.items as BigInt64Array) out.int64(item);
      return;
    default:
      for (const item of array.items as ArrayLike<number> as number[]) out.number(array.itemType, item);
  }
}

/** A growable little-endian byte buffer. */
class ByteWriter {
  private buffer = new Uint8Array(1 << 16);
  private view = new DataView(this.buffer.buffer);
  private length = 0;

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.byteLength) return;
    let capacity = this.buffer.byteLength * 2;
    while (capacity < this.length + bytes) capacity *= 2;
    const next = new Uint8Array(capacity);
    next.set(this.buffer.subarray(0, this.length));
    this.buffer = next;
    this.view = new DataView(next.buffer);
  }

  uint8(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  uint32(value: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, value, true);
    this.length += 4;
  }

  uint64(value: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, value, true);
    this.length += 8;
  }

  int64(value: bigint): void {
    this.reserve(8);
    this.view.setBigInt64(this.length, value, true);
    this.length += 8;
  }

  number(type: GGUFValueTypeName, value: number): void {
    const size = SCALAR_BYTES[type]!;
    this.reserve(size);
    const at = this.length;
    switch (type) {
      case "uint8":
        this.view.setUint8(at, value);
        break;
      case "int8":
        this.view.setInt8(at, value);
        break;
      case "uint16":
        this.view.setUint16(at, value, true);
        break;
      case "int16":
        this.view.setInt16(at, value, true);
        break;
      case "uint32":
        this.view.setUint32(at, value, true);
        break;
      case "int32":
        this.view.setInt32(at, value, true);
        break;
      case "float32":
        this.view.setFloat32(at, value, true);
        break;
      case "float64":
        this.view.setFloat64(at, value, true);
        break;
      default:
        throw new RangeError(`not a number type: ${type}`);
    }
    this.length += size;
  }

  string(value: string): void {
    const encoded = utf8.encode(value);
    this.uint64(BigInt(encoded.byteLength));
    this.reserve(encoded.byteLength);
    this.buffer.set(encoded, this.length);
    this.length += encoded.byteLength;
  }

  pad(alignment: number): void {
    const target = alignUp(this.length, alignment);
    this.reserve(target - this.length);
    this.buffer.fill(0, this.length, target);
    this.length = target;
  }

  bytes(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}
