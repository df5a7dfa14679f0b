/**
 * Quantized weights through libmemra_cpu's `memra_quantize` when the library is built: the same bytes
 * as @memra/gguf's TypeScript `quantize` (native/cpu/quantize.c follows it operation for operation;
 * native-quantize.test.ts checks them against each other bit for bit), q4_K at 54 M values/s with
 * AVX2 (10 M without) against 2.5 M. A k-quant golden model's 39 M-value embedding took ~15 s to
 * quantize in TypeScript: generating the golden suite's 23 models took 127 s. The 32-value block types
 * (q4_0 ... q8_0) run at 50-70 M values/s in TypeScript and a few times that natively.
 *
 * The library is looked for as @memra/cpu-ffi looks for it (MEMRA_CPU_LIBRARY, else native/build of
 * this checkout); this package cannot import @memra/cpu-ffi (whose tests import this package), so it
 * binds the one entry point it needs itself. Without the library, or with one built before
 * memra_quantize existed, everything falls back to the TypeScript quantizers.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { FFIType, dlopen, suffix } from "bun:ffi";
import { GGMLType, ggmlTypeInfo, quantize } from "@memra/gguf";

/** The types memra_quantize implements (a library built before the 32-value block types gives an error for them). */
const NATIVE_TYPES: ReadonlySet<number> = new Set([
  GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
  GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S,
]);

const SYMBOLS = {
  memra_last_error: { args: [], returns: FFIType.cstring },
  // (type, x, count, out, out_bytes)
  memra_quantize: { args: [FFIType.i32, FFIType.ptr, FFIType.i64, FFIType.ptr, FFIType.i64], returns: FFIType.i32 },
} as const;

type Loaded = { readonly quantize: (type: number, x: Float32Array, count: number, out: Uint8Array, outBytes: number) => number; readonly lastError: () => string };
let library: Loaded | undefined;
let unavailable: string | undefined;

function libraryPath(): string {
  const override = process.env.MEMRA_CPU_LIBRARY?.trim();
  if (override) return override;
  return fileURLToPath(new URL(`../../../native/build/libmemra_cpu.${suffix}`, import.meta.url));
}

function load(): Loaded | undefined {
  if (library !== undefined || unavailable !== undefined) return library;
  const path = libraryPath();
  if (!existsSync(path)) {
    unavailable = `${path} not found (bun run build makes it)`;
    return undefined;
  }
  try {
    const { symbols } = dlopen(path, SYMBOLS);
    library = {
      quantize: (type, x, count, out, outBytes) => symbols.memra_quantize(type, x, count, out, outBytes),
      lastError: () => String(symbols.memra_last_error()),
    };
  } catch (error) {
    unavailable = `${path} has no memra_quantize (${(error as Error).message}); rebuild it with bun run build`;
  }
  return library;
}

/** Why the native quantizer cannot be used, or undefined when it can. */
export function nativeQuantizerUnavailableReason(): string | undefined {
  load();
  return unavailable;
}

/**
 * `values` quantized to `type` by memra_quantize, or undefined when the library is unavailable or
 * does not implement `type`. Throws what memra_quantize reports (e.g. a count that is not a whole
 * number of blocks), naming the type.
 */
export function nativeQuantize(type: GGMLType | number, values: Float32Array): Uint8Array | undefined {
  if (!NATIVE_TYPES.has(type)) return undefined;
  const native = load();
  if (native === undefined) return undefined;
  const info = ggmlTypeInfo(type)!;
  const bytes = Math.floor(values.length / info.blockSize) * info.bytesPerBlock;
  const out = new Uint8Array(bytes);
  const status = native.quantize(type, values, values.length, out, bytes);
  // a library built before memra_quantize took the 32-value block types: the TypeScript quantizer does them
  if (status !== 0 && /is not supported/.test(native.lastError())) return undefined;
  if (status !== 0) throw new RangeError(`native quantize to ggml type ${type} failed (status ${status}): ${native.lastError()}`);
  return out;
}

/** `values` quantized to `type`: natively when possible, else by @memra/gguf's `quantize`; the same bytes either way. */
export function quantizeWeights(type: GGMLType | number, values: Float32Array): Uint8Array {
  return nativeQuantize(type, values) ?? quantize(type, values);
}
