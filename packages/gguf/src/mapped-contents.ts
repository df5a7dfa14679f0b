/**
 * A GGUF file memory-mapped in windows. Bun (JavaScriptCore) cannot make an ArrayBuffer of 4 GiB
 * or more, so `Bun.mmap` of a whole 8 GB model fails with "Out of memory"; the tensor data are
 * mapped instead in windows of at most `windowBytes`, split at tensor boundaries so that every
 * tensor lies wholly in one window and its data stay one zero-copy view.
 */
import { GGUFError } from "./gguf-error";
import type { GGUFFileContents, GGUFTensorInfo } from "./gguf-file";

/** The most bytes one mapping may hold: Bun cannot make an ArrayBuffer of 4 GiB. */
export const MAX_MAPPING_BYTES = 2 ** 32 - 1;
/** Bytes of tensor data per window unless a tensor alone is larger. */
export const DEFAULT_WINDOW_BYTES = 2 ** 31;
/**
 * Windows start at a multiple of this (64 KiB: a page on every system Bun runs on), so a tensor's
 * view is aligned in memory as it would be in a mapping of the whole file.
 */
export const MAPPING_ALIGNMENT = 2 ** 16;

/** Bytes [start, end) of a file, mapped as one Uint8Array when first used. */
export interface MappingWindow {
  readonly start: number;
  readonly end: number;
  /** The first tensor in the window, named in errors. */
  readonly firstTensor: string;
}

/**
 * The windows that hold the tensors' data (`dataOffset` + each tensor's offset and size), in file
 * order: a window grows tensor by tensor while it stays within `windowBytes`; a tensor larger than
 * that gets a window of its own. Each window starts at a multiple of MAPPING_ALIGNMENT below its
 * first tensor (at the tensor itself when that is what keeps it under MAX_MAPPING_BYTES). A window
 * over MAX_MAPPING_BYTES, a tensor of 4 GiB or more, is planned as any other and refused when used.
 * Empty tensors need no window.
 */
export function planMappingWindows(tensors: readonly GGUFTensorInfo[], dataOffset: number, windowBytes: number = DEFAULT_WINDOW_BYTES): MappingWindow[] {
  checkMappingBytes("windowBytes", windowBytes);
  const byOffset = tensors.filter((t) => t.byteSize > 0).sort((a, b) => a.offset - b.offset);
  const windows: Array<{ start: number; end: number; firstTensor: string }> = [];
  let current: { start: number; end: number; firstTensor: string } | undefined;
  for (const tensor of byOffset) {
    const start = dataOffset + tensor.offset;
    const end = start + tensor.byteSize;
    if (current !== undefined && end - current.start <= windowBytes) {
      current.end = end;
      continue;
    }
    const aligned = start - (start % MAPPING_ALIGNMENT);
    current = { start: end - aligned <= MAX_MAPPING_BYTES ? aligned : start, end, firstTensor: tensor.name };
    windows.push(current);
  }
  return windows;
}

/** @throws RangeError unless `value` is a whole number of bytes that one mapping can hold. */
export function checkMappingBytes(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_MAPPING_BYTES) {
    throw new RangeError(`${name} must be a whole number from 1 to ${MAX_MAPPING_BYTES}, got ${value}`);
  }
}

/** The contents of a file at `path`, mapped window by window on first use (so opening maps no data). */
export class MappedContents implements GGUFFileContents {
  private readonly mappings: Array<Uint8Array | undefined>;

  constructor(
    readonly path: string,
    readonly byteLength: number,
    /** In file order, as planMappingWindows plans them. */
    readonly windows: readonly MappingWindow[],
  ) {
    this.mappings = new Array<Uint8Array | undefined>(windows.length);
  }

  view(start: number, length: number): Uint8Array {
    if (length === 0) return new Uint8Array(0);
    const end = start + length;
    // The last window starting at or before `start`: windows' starts and ends both rise in file
    // order, so if that one does not reach `end`, no window does.
    let low = 0;
    let high = this.windows.length - 1;
    let found = -1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      if (this.windows[middle]!.start <= start) {
        found = middle;
        low = middle + 1;
      } else high = middle - 1;
    }
    const window = this.windows[found];
    if (window === undefined || window.end < end) {
      throw new GGUFError("tensor_data", start, `bytes [${start}, ${end}) of ${this.path} are not tensor data of one mapped window`);
    }
    const mapping = (this.mappings[found] ??= this.map(window));
    return mapping.subarray(start - window.start, end - window.start);
  }

  private map(window: MappingWindow): Uint8Array {
    const size = window.end - window.start;
    if (size > MAX_MAPPING_BYTES) {
      throw new GGUFError(
        `tensor "${window.firstTensor}"`,
        window.start,
        `its data are ${size} bytes (${(size / 2 ** 30).toFixed(2)} GiB): a tensor of 4 GiB or more cannot be memory-mapped (Bun's ArrayBuffers are smaller)`,
      );
    }
    return mapFileRange(this.path, window.start, size);
  }
}

/**
 * Bytes [start, start + length) of the file at `path`, memory-mapped privately.
 * @throws GGUFError "file" naming the path and the reason.
 */
export function mapFileRange(path: string, start: number, length: number): Uint8Array {
  let mapping: Uint8Array;
  try {
    mapping = Bun.mmap(path, { shared: false, offset: start, size: length });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new GGUFError("file", -1, `cannot map bytes [${start}, ${start + length}) of ${path}: ${reason}`);
  }
  // Bun clamps the size to the file's: a file cut short since it was opened maps short.
  if (mapping.byteLength < length) {
    throw new GGUFError("file", -1, `cannot map bytes [${start}, ${start + length}) of ${path}: the file ends at byte ${start + mapping.byteLength}`);
  }
  return mapping;
}
