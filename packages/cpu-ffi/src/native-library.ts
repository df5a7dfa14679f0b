/**
 * The bun:ffi binding of libmemra_cpu (native/include/memra.h): one symbol table, names identical
 * to C, grouped as in the header; one typed wrapper (`call`) that throws a NativeError carrying
 * memra_last_error() when an entry point returns a non-zero status; MEMRA_FFI_TRACE=1 logs every
 * call with its arguments, result and time to stderr.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { FFIType, type Library, type Pointer, dlopen, suffix } from "bun:ffi";
import { NativeError, NativeLibraryUnavailableError } from "./errors";

/** MEMRA_ABI_VERSION this binding is written against. */
export const MEMRA_ABI_VERSION = 1;

const { ptr, i32, i64, f32, cstring } = FFIType;

export const MEMRA_CPU_SYMBOLS = {
  // ---- library ----
  memra_version: { args: [], returns: cstring },
  memra_abi_version: { args: [], returns: i32 },
  memra_last_error: { args: [], returns: cstring },
  memra_cpu_isa: { args: [], returns: cstring },
  memra_cpu_supports: { args: [i32, i32], returns: i32 },
  memra_cpu_processor_count: { args: [], returns: i32 },

  // ---- context ----
  memra_cpu_create: { args: [i32], returns: ptr },
  memra_cpu_destroy: { args: [ptr], returns: FFIType.void },
  memra_cpu_thread_count: { args: [ptr], returns: i32 },
  memra_cpu_set_batch_invariant: { args: [ptr, i32], returns: i32 },

  // ---- ops (cpu, output first; every buffer followed by its length in elements) ----
  // (cpu, out, out_length, type, table, table_bytes, width, rows_in_table, ids, id_count)
  memra_cpu_embedding: { args: [ptr, ptr, i64, i32, ptr, i64, i64, i64, ptr, i64], returns: i32 },
  // (cpu, out, out_length, type, data, data_bytes, count)
  memra_cpu_dequantize: { args: [ptr, ptr, i64, i32, ptr, i64, i64], returns: i32 },
  // (cpu, out, out_length, x, x_length, weight, weight_length, rows, width, eps)
  memra_cpu_rms_norm: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64, i64, f32], returns: i32 },
  // (cpu, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out)
  memra_cpu_matmul: { args: [ptr, ptr, i64, ptr, i64, i64, i32, ptr, i64, i64, i64], returns: i32 },
  // (cpu, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, experts, expert)
  memra_cpu_expert_matmul: { args: [ptr, ptr, i64, ptr, i64, i64, i32, ptr, i64, i64, i64, i64, i64], returns: i32 },
  // (cpu, x, x_length, positions, rows, heads, head_dim, freq_base)
  memra_cpu_rope_neox: { args: [ptr, ptr, i64, ptr, i64, i64, i64, f32], returns: i32 },
  memra_cpu_rope_neox_scaled: { args: [ptr, ptr, i64, ptr, i64, i64, i64, f32, f32, f32, f32, f32, f32], returns: i32 },
  // (cpu, out, out_length, q, q_length, keys, values, kv_length, kv_rows, rows, heads, kv_heads, head_dim, first_row, scale)
  memra_cpu_attention: { args: [ptr, ptr, i64, ptr, i64, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, f32], returns: i32 },
  // (cpu, type, storage, storage_bytes, width, slots, count, source, source_length)
  memra_cpu_kv_write: { args: [ptr, i32, ptr, i64, i64, ptr, i64, ptr, i64], returns: i32 },
  // (cpu, type, storage, storage_bytes, heads, head_dim, slots, count, delta, freq_base, rope: 5 floats or NULL)
  memra_cpu_kv_rotate: { args: [ptr, i32, ptr, i64, i64, i64, ptr, i64, i32, f32, ptr], returns: i32 },
  // (cpu, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables, table_length,
  //  sequences, sequence_count, rows, heads, kv_heads, head_dim, scale)
  memra_cpu_paged_attention: { args: [ptr, ptr, i64, ptr, i64, i32, ptr, ptr, i64, i64, ptr, i64, ptr, i64, i64, i64, i64, i64, f32], returns: i32 },
  // (cpu, out, out_length, gate, gate_length, up, up_length, length)
  memra_cpu_swiglu: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cpu, out, out_length, a, a_length, b, b_length, length)
  memra_cpu_add: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cpu, ids_out, weights_out, out_length, logits, logits_length, rows, experts, k)
  memra_cpu_moe_route: { args: [ptr, ptr, ptr, i64, ptr, i64, i64, i64, i64], returns: i32 },
  // (cpu, out, out_length, x, x_length, row_ids, count, width)
  memra_cpu_gather_rows: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cpu, out, out_length, x, x_length, row_ids, scales, count, width)
  memra_cpu_scatter_add_rows: { args: [ptr, ptr, i64, ptr, i64, ptr, ptr, i64, i64], returns: i32 },
  // (cpu, type, x, count, out, out_bytes): k-quants, byte for byte as ggml's reference quantizers
  memra_cpu_quantize: { args: [ptr, i32, ptr, i64, ptr, i64], returns: i32 },
  // (cpu, type, x, rows, row_length, importance (row_length floats) or NULL, out, out_bytes): ggml_quantize_chunk with an imatrix
  memra_cpu_quantize_rows: { args: [ptr, i32, ptr, i64, i64, ptr, ptr, i64], returns: i32 },
} as const;

type MemraCpuSymbols = Library<typeof MEMRA_CPU_SYMBOLS>["symbols"];

/** Entry points that return an int status (memra_status). */
export type StatusSymbol = Exclude<
  Extract<keyof typeof MEMRA_CPU_SYMBOLS, `memra_cpu_${string}`>,
  "memra_cpu_isa" | "memra_cpu_supports" | "memra_cpu_processor_count" | "memra_cpu_create" | "memra_cpu_destroy" | "memra_cpu_thread_count"
>;

/** enum memra_op, by backend op name. */
export const MEMRA_OPS = {
  embedding: 0,
  rmsNorm: 1,
  matmul: 2,
  ropeNeox: 3,
  attention: 4,
  swiglu: 5,
  add: 6,
  moeRoute: 7,
  expertMatmul: 8,
  gatherRows: 9,
  scatterAddRows: 10,
} as const;

/** MEMRA_NO_WEIGHT_TYPE */
export const NO_WEIGHT_TYPE = -1;

function formatTraceValue(value: unknown, type: FFIType | undefined): string {
  if (value === null || value === undefined) return type === FFIType.void ? "" : "NULL";
  if (type === FFIType.ptr && (typeof value === "number" || typeof value === "bigint")) return `0x${value.toString(16)}`;
  if (typeof value === "string" || type === FFIType.cstring) return JSON.stringify(String(value));
  return String(value);
}

/** Wraps every function of `symbols` to log its calls (arguments, result, time) to stderr. */
function traced(symbols: MemraCpuSymbols): MemraCpuSymbols {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(symbols) as [string, (...args: unknown[]) => unknown][]) {
    const signature = MEMRA_CPU_SYMBOLS[name as keyof typeof MEMRA_CPU_SYMBOLS];
    const argumentTypes: readonly FFIType[] = signature.args;
    wrapped[name] = (...args: unknown[]) => {
      const started = performance.now();
      const result = fn(...args);
      const microseconds = ((performance.now() - started) * 1000).toFixed(1);
      const shown = args.map((value, i) => formatTraceValue(value, argumentTypes[i])).join(", ");
      process.stderr.write(`[memra ffi] ${name}(${shown}) -> ${formatTraceValue(result, signature.returns)} ${microseconds} µs\n`);
      return result;
    };
  }
  return wrapped as MemraCpuSymbols;
}

/** The loaded library: raw symbols plus the checking wrapper. */
export class MemraCpuLibrary {
  readonly symbols: MemraCpuSymbols;

  constructor(
    private readonly library: Library<typeof MEMRA_CPU_SYMBOLS>,
    /** The file it was loaded from. */
    readonly path: string,
    trace: boolean,
  ) {
    this.symbols = trace ? traced(library.symbols) : library.symbols;
  }

  /** Calls a status-returning entry point; throws NativeError with the library's message on failure. */
  call<K extends StatusSymbol>(name: K, ...args: Parameters<MemraCpuSymbols[K]>): void {
    const status = (this.symbols[name] as (...values: unknown[]) => number)(...args);
    if (status !== 0) throw new NativeError(name, status, this.lastError());
  }

  lastError(): string {
    return String(this.symbols.memra_last_error() ?? "");
  }

  get version(): string {
    return String(this.symbols.memra_version());
  }

  /** The SIMD path of the dot-product kernels ("avx512vnni", "avx2", "neondot", "neon", "scalar"). */
  get isa(): string {
    return String(this.symbols.memra_cpu_isa());
  }

  /** Creates a context (memra_cpu_create); throws NativeError on failure. */
  createContext(threads: number): Pointer {
    const handle = this.symbols.memra_cpu_create(threads);
    if (handle === null || handle === 0) throw new NativeError("memra_cpu_create", -1, this.lastError());
    return handle as Pointer;
  }

  destroyContext(handle: Pointer): void {
    this.symbols.memra_cpu_destroy(handle);
  }

  close(): void {
    this.library.close();
  }
}

/** Where the library is looked for: MEMRA_CPU_LIBRARY alone when set, else native/build of this checkout. */
export function libraryCandidates(): string[] {
  const override = process.env.MEMRA_CPU_LIBRARY?.trim();
  if (override) return [override];
  // src/ and dist/ both sit two levels below the repository root's packages/ directory.
  return [fileURLToPath(new URL(`../../../native/build/libmemra_cpu.${suffix}`, import.meta.url))];
}

const opened = new Map<string, MemraCpuLibrary>();

/**
 * Loads libmemra_cpu once per process (later calls return the same library).
 * @throws NativeLibraryUnavailableError when no candidate exists or loading fails.
 */
export function openMemraCpuLibrary(path?: string): MemraCpuLibrary {
  const candidates = path ? [path] : libraryCandidates();
  const found = candidates.find((candidate) => existsSync(candidate));
  if (!found) {
    const how = process.env.MEMRA_CPU_LIBRARY ? "MEMRA_CPU_LIBRARY names a file that does not exist" : "build it with `bun run build` (needs a C compiler), or set MEMRA_CPU_LIBRARY";
    throw new NativeLibraryUnavailableError(candidates, "missing", `${candidates.join(", ")} not found; ${how}`);
  }
  const cached = opened.get(found);
  if (cached) return cached;
  let library: Library<typeof MEMRA_CPU_SYMBOLS>;
  try {
    library = dlopen(found, MEMRA_CPU_SYMBOLS);
  } catch (error) {
    throw new NativeLibraryUnavailableError(candidates, "load-failed", `loading ${found} failed: ${(error as Error).message}`);
  }
  const abi = library.symbols.memra_abi_version();
  if (abi !== MEMRA_ABI_VERSION) {
    library.close();
    throw new NativeLibraryUnavailableError(candidates, "abi-mismatch", `${found} has ABI version ${abi}, this package needs ${MEMRA_ABI_VERSION}: rebuild it with \`bun run build\``);
  }
  const loaded = new MemraCpuLibrary(library, found, process.env.MEMRA_FFI_TRACE === "1");
  opened.set(found, loaded);
  return loaded;
}
