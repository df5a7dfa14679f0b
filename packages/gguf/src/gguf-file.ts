import { type GGMLType, ggmlTypeName } from "./ggml-type";
import { GGUFError } from "./gguf-error";
import { type GGUFArrayValue, type GGUFPlainValue, type GGUFValue, jsonValue, plainValue } from "./gguf-value";

export interface GGUFTensorInfo {
  readonly name: string;
  readonly type: GGMLType;
  /** Dimensions innermost first, as GGUF stores them ([ne0, ne1, ...]). */
  readonly shape: readonly number[];
  readonly elementCount: number;
  /** Bytes from the start of the data section. */
  readonly offset: number;
  readonly byteSize: number;
}

/**
 * A file's bytes by position, for tensor data. A file opened from a path can be larger than one
 * ArrayBuffer can be (Bun cannot make one of 4 GiB), so it is not one Uint8Array.
 */
export interface GGUFFileContents {
  /** Bytes in the whole file. */
  readonly byteLength: number;
  /**
   * Bytes [start, start + length) of the file, as a view (no copy).
   * @throws GGUFError when they cannot be mapped.
   */
  view(start: number, length: number): Uint8Array;
}

/** The contents of a file held in one Uint8Array (read into memory, or memory-mapped whole). */
export function contentsInMemory(bytes: Uint8Array): GGUFFileContents {
  return {
    byteLength: bytes.byteLength,
    view: (start, length) => bytes.subarray(start, start + length),
  };
}

export interface GGUFFileParts {
  readonly version: number;
  readonly alignment: number;
  readonly metadata: Map<string, GGUFValue>;
  readonly tensors: readonly GGUFTensorInfo[];
  /** Byte offset of the data section in the file. */
  readonly dataOffset: number;
  /**
   * The file's first bytes: at least its metadata and tensor infos (maybe not the padding after
   * them, up to `dataOffset`). From `readGGUF`, and `openGGUF` of a file of up to 2 GiB, the whole file.
   */
  readonly header: Uint8Array;
  /** The whole file, where tensor data are read from; when absent, `header` is the whole file. */
  readonly contents?: GGUFFileContents | undefined;
  readonly path?: string | undefined;
}

/** A parsed GGUF file: metadata, tensor infos, and zero-copy access to tensor data. */
export class GGUFFile {
  readonly version: number;
  readonly alignment: number;
  readonly metadata: Map<string, GGUFValue>;
  readonly tensors: readonly GGUFTensorInfo[];
  readonly dataOffset: number;
  /** The file's first bytes, through its tensor infos at least (see `GGUFFileParts.header`); `contents` for tensor data. */
  readonly header: Uint8Array;
  /** The whole file; tensor data are views into it. */
  readonly contents: GGUFFileContents;
  readonly path: string | undefined;
  private readonly tensorsByName: Map<string, GGUFTensorInfo>;

  constructor(parts: GGUFFileParts) {
    this.version = parts.version;
    this.alignment = parts.alignment;
    this.metadata = parts.metadata;
    this.tensors = parts.tensors;
    this.dataOffset = parts.dataOffset;
    this.header = parts.header;
    this.contents = parts.contents ?? contentsInMemory(parts.header);
    this.path = parts.path;
    this.tensorsByName = new Map(parts.tensors.map((t) => [t.name, t]));
  }

  /** `general.architecture`, e.g. "qwen3". */
  get architecture(): string | undefined {
    const value = this.metadata.get("general.architecture");
    return value?.type === "string" ? value.value : undefined;
  }

  has(key: string): boolean {
    return this.metadata.has(key);
  }

  /** A metadata value without its type tag, or undefined when absent. */
  get(key: string): GGUFPlainValue | undefined {
    const value = this.metadata.get(key);
    return value === undefined ? undefined : plainValue(value);
  }

  /** A numeric metadata value (any integer or float type; 64-bit integers must be exactly representable). */
  getNumber(key: string): number | undefined {
    const value = this.metadata.get(key);
    if (value === undefined) return undefined;
    if (value.type === "uint64" || value.type === "int64") {
      if (value.value > BigInt(Number.MAX_SAFE_INTEGER) || value.value < BigInt(Number.MIN_SAFE_INTEGER)) {
        throw new GGUFError(`kv["${key}"]`, 0, `${value.value} does not fit in a JavaScript number`);
      }
      return Number(value.value);
    }
    if (value.type !== "array" && typeof value.value === "number") return value.value;
    throw new GGUFError(`kv["${key}"]`, 0, `expected a number, found ${value.type}`);
  }

  getString(key: string): string | undefined {
    const value = this.metadata.get(key);
    if (value === undefined) return undefined;
    if (value.type !== "string") throw new GGUFError(`kv["${key}"]`, 0, `expected a string, found ${value.type}`);
    return value.value;
  }

  getBoolean(key: string): boolean | undefined {
    const value = this.metadata.get(key);
    if (value === undefined) return undefined;
    if (value.type !== "bool") throw new GGUFError(`kv["${key}"]`, 0, `expected a bool, found ${value.type}`);
    return value.value;
  }

  getArray(key: string): GGUFArrayValue | undefined {
    const value = this.metadata.get(key);
    if (value === undefined) return undefined;
    if (value.type !== "array") throw new GGUFError(`kv["${key}"]`, 0, `expected an array, found ${value.type}`);
    return value;
  }

  tensor(name: string): GGUFTensorInfo | undefined {
    return this.tensorsByName.get(name);
  }

  /** The bytes of a tensor, as a view into the file (no copy). */
  tensorData(tensor: string | GGUFTensorInfo): Uint8Array {
    const info = typeof tensor === "string" ? this.tensorsByName.get(tensor) : tensor;
    if (!info) throw new GGUFError("tensor_infos", 0, `no tensor named "${String(tensor)}"`);
    return this.contents.view(this.dataOffset + info.offset, info.byteSize);
  }

  /** Bytes of the file (of all its shards, for a split model). */
  get fileBytes(): number {
    return this.contents.byteLength;
  }

  /** The file's path (every shard's, for a split model); empty when it was read from memory. */
  get paths(): readonly string[] {
    return this.path === undefined ? [] : [this.path];
  }

  /** Total bytes of tensor data. */
  get tensorBytes(): number {
    let total = 0;
    for (const t of this.tensors) total += t.byteSize;
    return total;
  }

  /** The JSON shape `memra inspect --json` prints. */
  toJSON(): {
    version: number;
    alignment: number;
    metadata: Record<string, unknown>;
    tensors: Array<{ name: string; type: string; shape: number[]; offset: number }>;
  } {
    const metadata: Record<string, unknown> = {};
    for (const [key, value] of this.metadata) metadata[key] = jsonValue(value);
    return {
      version: this.version,
      alignment: this.alignment,
      metadata,
      tensors: this.tensors.map((t) => ({ name: t.name, type: ggmlTypeName(t.type), shape: [...t.shape], offset: t.offset })),
    };
  }
}
