/**
 * libmemra_cpu's quantizers (memra_cpu_quantize, and with an importance matrix
 * memra_cpu_quantize_rows, over a thread pool) as a RowQuantizer for @memra/gguf's quantizeModel:
 * the bytes of @memra/gguf's TypeScript quantizers (and of ggml's ggml_quantize_chunk), k-quants
 * 15-25x faster per thread. f16, bf16 and f32 outputs are left to the TypeScript conversions.
 */
import { ptr } from "bun:ffi";
import { GGMLType, type RowDequantizer, type RowQuantizer, ggmlTypeInfo } from "@memra/gguf";
import { NativeError } from "./errors";
import { openMemraCpuLibrary } from "./native-library";

/** The types memra_cpu_quantize and memra_cpu_quantize_rows write. */
const NATIVE_TYPES: ReadonlySet<GGMLType> = new Set([
  GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
  GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ3_S, GGMLType.IQ3_XXS,
  GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S, GGMLType.IQ1_S, GGMLType.IQ1_M,
]);

export interface NativeQuantizer {
  readonly quantizer: RowQuantizer;
  /** f16 and bf16 to float32 (exact conversions: the same values as @memra/gguf's). */
  readonly dequantizer: RowDequantizer;
  readonly threads: number;
  /** Frees the thread pool. */
  dispose(): void;
}

/**
 * A RowQuantizer on `threads` threads (default: the processors the library sees).
 * @throws NativeLibraryUnavailableError when libmemra_cpu is not built or cannot be loaded.
 */
export function createNativeQuantizer(threads?: number): NativeQuantizer {
  const library = openMemraCpuLibrary();
  const count = threads ?? Math.max(1, library.symbols.memra_cpu_processor_count());
  const context = library.createContext(count);
  let disposed = false;
  const quantizer: RowQuantizer = (type, values, out, importance) => {
    // without importance the values are one row (rows do not matter then); shapes quantize rejects are left to it
    const rowLength = importance?.length ?? values.length;
    const blockSize = ggmlTypeInfo(type)?.blockSize ?? 0;
    if (!NATIVE_TYPES.has(type) || values.length === 0 || rowLength === 0 || rowLength % blockSize !== 0 || values.length % rowLength !== 0) return false;
    if (disposed) throw new Error("createNativeQuantizer: the quantizer was disposed");
    if (importance === undefined) {
      const status = library.symbols.memra_cpu_quantize(context, type, ptr(values), values.length, ptr(out), out.byteLength);
      if (status !== 0) throw new NativeError("memra_cpu_quantize", status, library.lastError());
      return true;
    }
    const rows = values.length / rowLength;
    const status = library.symbols.memra_cpu_quantize_rows(context, type, ptr(values), rows, rowLength, ptr(importance), ptr(out), out.byteLength);
    if (status !== 0) throw new NativeError("memra_cpu_quantize_rows", status, library.lastError());
    return true;
  };
  const dequantizer: RowDequantizer = (type, bytes, count, out) => {
    if ((type !== GGMLType.F16 && type !== GGMLType.BF16) || count === 0) return false;
    if (disposed) throw new Error("createNativeQuantizer: the quantizer was disposed");
    const status = library.symbols.memra_cpu_dequantize(context, ptr(out), out.length, type, ptr(bytes), bytes.byteLength, count);
    if (status !== 0) throw new NativeError("memra_cpu_dequantize", status, library.lastError());
    return true;
  };
  return {
    quantizer,
    dequantizer,
    threads: library.symbols.memra_cpu_thread_count(context),
    dispose() {
      if (disposed) return;
      disposed = true;
      library.destroyContext(context);
    },
  };
}
