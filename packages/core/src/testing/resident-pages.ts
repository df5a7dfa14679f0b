/**
 * For tests: the fraction of a buffer's memory pages that are resident (Linux mincore through
 * bun:ffi). A process's RSS is no measure of one buffer: an allocator may hand out memory that an
 * earlier, freed buffer had already made resident.
 */
import { FFIType, dlopen, ptr } from "bun:ffi";

const PAGE = 4096;
let libc: { symbols: { mincore: (address: number, length: number, vector: Uint8Array) => number } } | undefined;

export function residentFraction(bytes: Uint8Array): number {
  libc ??= dlopen("libc.so.6", { mincore: { args: [FFIType.u64, FFIType.u64, FFIType.ptr], returns: FFIType.i32 } }) as never;
  const address = ptr(bytes);
  const start = Math.floor(address / PAGE) * PAGE;
  const length = address + bytes.byteLength - start;
  const pages = new Uint8Array(Math.ceil(length / PAGE));
  if (libc!.symbols.mincore(start, length, pages) !== 0) throw new Error("mincore failed");
  return pages.reduce((sum, page) => sum + (page & 1), 0) / pages.length;
}
