/**
 * The bun:ffi binding of libmemra_cuda (native/include/memra_cuda.h): one symbol table, names
 * identical to C, grouped as in the header; one typed wrapper (`call`) that throws a CudaError
 * carrying memra_cuda_last_error() on a non-zero status; MEMRA_FFI_TRACE=1 logs every call.
 * Nothing is loaded at import: openMemraCudaLibrary() loads the library on first use.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { FFIType, type Library, type Pointer, dlopen, suffix } from "bun:ffi";
import { CUDA_STATUS_NO_DEVICE, CudaError, CudaUnavailableError } from "./errors";

/** MEMRA_CUDA_ABI_VERSION this binding is written against. */
export const MEMRA_CUDA_ABI_VERSION = 7;

const { ptr, i32, i64, f32, cstring } = FFIType;

export const MEMRA_CUDA_SYMBOLS = {
  // ---- library ----
  memra_cuda_version: { args: [], returns: cstring },
  memra_cuda_abi_version: { args: [], returns: i32 },
  memra_cuda_last_error: { args: [], returns: cstring },
  memra_cuda_last_status: { args: [], returns: i32 },
  memra_cuda_supports: { args: [i32, i32], returns: i32 },
  // (type, rows, n_in, n_out, plan, plan_length)
  memra_cuda_plan_matmul: { args: [i32, i64, i64, i64, ptr, i64], returns: i32 },

  // ---- devices and context ----
  memra_cuda_device_count: { args: [ptr], returns: i32 },
  memra_cuda_create: { args: [i32], returns: ptr },
  memra_cuda_destroy: { args: [ptr], returns: FFIType.void },
  // (cuda, name, name_bytes, compute_capability, multiprocessors)
  memra_cuda_device_info: { args: [ptr, ptr, i64, ptr, ptr], returns: i32 },
  // (cuda, capacity, hold_microseconds)
  memra_cuda_profile_begin: { args: [ptr, i64, i64], returns: i32 },
  // (cuda, names, names_bytes, microseconds, capacity, count)
  memra_cuda_profile_end: { args: [ptr, ptr, i64, ptr, i64, ptr], returns: i32 },
  memra_cuda_programmatic_launch: { args: [], returns: i32 },
  // (cuda, free_bytes, total_bytes, cached_bytes)
  memra_cuda_memory_info: { args: [ptr, ptr, ptr, ptr], returns: i32 },
  memra_cuda_synchronize: { args: [ptr], returns: i32 },
  // (cuda, gemm, activation_rounding): 1 on, 0 off, -1 unchanged
  memra_cuda_configure: { args: [ptr, i32, i32], returns: i32 },

  // ---- memory ----
  memra_cuda_alloc: { args: [ptr, i64], returns: ptr },
  memra_cuda_free: { args: [ptr, ptr], returns: i32 },
  memra_cuda_release_cached: { args: [ptr], returns: i32 },
  // (cuda, device, host, bytes)
  memra_cuda_upload: { args: [ptr, ptr, ptr, i64], returns: i32 },
  // (cuda, host, device, bytes)
  memra_cuda_download: { args: [ptr, ptr, ptr, i64], returns: i32 },
  // (cuda, target, source, bytes)
  memra_cuda_copy: { args: [ptr, ptr, ptr, i64], returns: i32 },
  memra_cuda_zero: { args: [ptr, ptr, i64], returns: i32 },

  // ---- ops (output first; float buffers are device pointers + lengths, index arrays host pointers) ----
  // (cuda, out, out_length, type, table, table_bytes, width, rows_in_table, ids, id_count)
  memra_cuda_embedding: { args: [ptr, ptr, i64, i32, ptr, i64, i64, i64, ptr, i64], returns: i32 },
  // (cuda, out, out_length, type, data, data_bytes, count)
  memra_cuda_dequantize: { args: [ptr, ptr, i64, i32, ptr, i64, i64], returns: i32 },
  memra_cuda_repacked_type_of: { args: [i32, i64], returns: i32 },
  memra_cuda_repack: { args: [ptr, i32, ptr, i64, i64, i64], returns: i32 },
  // (cuda, out, out_length, x, x_length, weight, weight_length, rows, width, eps)
  memra_cuda_rms_norm: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64, i64, f32], returns: i32 },
  // (cuda, out, out_length, hidden, hidden_length, delta, delta_length, weight, weight_length, rows, width, eps)
  memra_cuda_add_rms_norm: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, ptr, i64, i64, i64, f32], returns: i32 },
  // (cuda, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out)
  memra_cuda_matmul: { args: [ptr, ptr, i64, ptr, i64, i64, i32, ptr, i64, i64, i64], returns: i32 },
  // (cuda, out, out_length, gate, gate_length, up, up_length, rows, type, weight, weight_bytes, n_in, n_out)
  memra_cuda_swiglu_matmul: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64, i32, ptr, i64, i64, i64], returns: i32 },
  // (cuda, count, outs, out_lengths, x, x_length, rows, types, weights, weight_bytes, n_in, n_outs)
  memra_cuda_matmul_shared: { args: [ptr, i64, ptr, ptr, ptr, i64, i64, ptr, ptr, ptr, i64, ptr], returns: i32 },
  // (cuda, normed, normed_length, hidden, hidden_length, delta, delta_length, norm_weight, norm_weight_length, eps,
  //  count, outs, out_lengths, rows, types, weights, weight_bytes, n_in, n_outs)
  memra_cuda_norm_matmul_shared: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, ptr, i64, f32, i64, ptr, ptr, i64, ptr, ptr, ptr, i64, ptr], returns: i32 },
  // (cuda, out, out_length, x, x_length, rows, type, weight, weight_bytes, n_in, n_out, experts, expert)
  memra_cuda_expert_matmul: { args: [ptr, ptr, i64, ptr, i64, i64, i32, ptr, i64, i64, i64, i64, i64], returns: i32 },
  // (cuda, x, x_length, positions, rows, heads, head_dim, freq_base)
  memra_cuda_rope_neox: { args: [ptr, ptr, i64, ptr, i64, i64, i64, f32], returns: i32 },
  memra_cuda_rope_neox_scaled: { args: [ptr, ptr, i64, ptr, i64, i64, i64, f32, f32, f32, f32, f32, f32], returns: i32 },
  // (cuda, q, q_length, k, k_length, q_weight, k_weight, weight_length, positions, rows, heads, kv_heads, head_dim, eps, freq_base,
  //  rope: 5 floats of RoPE scaling or null)
  memra_cuda_qk_norm_rope: { args: [ptr, ptr, i64, ptr, i64, ptr, ptr, i64, ptr, i64, i64, i64, i64, f32, f32, ptr], returns: i32 },
  // (cuda, q, q_length, k, k_length, v, v_length, q_weight, k_weight, weight_length, positions, rows, heads, kv_heads, head_dim, eps, freq_base,
  //  type, keys, values, storage_bytes, slots, rope: 5 floats of RoPE scaling or null)
  memra_cuda_qk_norm_rope_kv: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, ptr, ptr, i64, ptr, i64, i64, i64, i64, f32, f32, i32, ptr, ptr, i64, ptr, ptr], returns: i32 },
  // (cuda, type, keys, values, storage_bytes, width, slots, count, k, k_length, v, v_length)
  memra_cuda_kv_write_pair: { args: [ptr, i32, ptr, ptr, i64, i64, ptr, i64, ptr, i64, ptr, i64], returns: i32 },
  // (cuda, type, storage, storage_bytes, width, slots, count, source, source_length)
  memra_cuda_kv_write: { args: [ptr, i32, ptr, i64, i64, ptr, i64, ptr, i64], returns: i32 },
  // (cuda, type, storage, storage_bytes, heads, head_dim, slots, count, delta, freq_base, rope: 5 floats or NULL)
  memra_cuda_kv_rotate: { args: [ptr, i32, ptr, i64, i64, i64, ptr, i64, i32, f32, ptr], returns: i32 },
  // (cuda, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables, table_length,
  //  sequences, sequence_count, rows, heads, kv_heads, head_dim, scale)
  memra_cuda_paged_attention: { args: [ptr, ptr, i64, ptr, i64, i32, ptr, ptr, i64, i64, ptr, i64, ptr, i64, i64, i64, i64, i64, f32], returns: i32 },
  // (cuda, projected, projected_length, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables, table_length,
  //  sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, weight_type, weight, weight_bytes, n_out, then: memra_cuda_residual_norm or null)
  memra_cuda_attention_matmul: {
    args: [ptr, ptr, i64, ptr, i64, ptr, i64, i32, ptr, ptr, i64, i64, ptr, i64, ptr, i64, i64, i64, i64, i64, f32, i32, ptr, i64, i64, ptr],
    returns: i32,
  },
  // (cuda, projected, projected_length, out, out_length, q, q_length, type, keys, values, storage_bytes, block_tokens, block_tables, table_length,
  //  sequences, sequence_count, rows, heads, kv_heads, head_dim, scale, weight_type, weight, weight_bytes, n_out, qk: memra_cuda_qk_inputs,
  //  then: memra_cuda_residual_norm or null, rope: 5 floats of RoPE scaling or null)
  memra_cuda_qk_norm_rope_attention_matmul: {
    args: [ptr, ptr, i64, ptr, i64, ptr, i64, i32, ptr, ptr, i64, i64, ptr, i64, ptr, i64, i64, i64, i64, i64, f32, i32, ptr, i64, i64, ptr, ptr, ptr],
    returns: i32,
  },
  // (cuda, type, rows, n_in, n_out) → 1 or 0, not a status
  memra_cuda_matmul_norm_tail_applies: { args: [ptr, i32, i64, i64, i64], returns: i32 },
  // (cuda, rows, gate_type, up_type, n_in, ffn, down_type, n_out) → 1 or 0, not a status
  memra_cuda_norm_swiglu_matmul_applies: { args: [ptr, i64, i32, i32, i64, i64, i32, i64], returns: i32 },
  // (cuda, normed, normed_length, hidden, hidden_length, delta, delta_length, norm_weight, norm_weight_length, eps, outs, out_lengths, rows, types,
  //  weights, weight_bytes, n_in, ffn, projected, projected_length, down_type, down_weight, down_weight_bytes, n_out, then: memra_cuda_residual_norm or null)
  memra_cuda_norm_swiglu_matmul: {
    args: [ptr, ptr, i64, ptr, i64, ptr, i64, ptr, i64, f32, ptr, ptr, i64, ptr, ptr, ptr, i64, i64, ptr, i64, i32, ptr, i64, i64, ptr],
    returns: i32,
  },
  // (cuda, out, out_length, gate, gate_length, up, up_length, length)
  memra_cuda_swiglu: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cuda, out, out_length, a, a_length, b, b_length, length)
  memra_cuda_add: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cuda, ids_out, weights_out, out_length, logits, logits_length, rows, experts, k)
  memra_cuda_moe_route: { args: [ptr, ptr, ptr, i64, ptr, i64, i64, i64, i64], returns: i32 },
  // (cuda, out, out_length, x, x_length, logits, logits_length, rows, experts, k,
  //  gate_type, gate, gate_bytes, up_type, up, up_bytes, down_type, down, down_bytes, embedding, ffn)
  memra_cuda_moe_experts: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64, i64, i64, i32, ptr, i64, i32, ptr, i64, i32, ptr, i64, i64, i64], returns: i32 },
  // (cuda, out, out_length, x, x_length, row_ids, count, width)
  memra_cuda_gather_rows: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64], returns: i32 },
  // (cuda, out, out_length, x, x_length, row_ids, scales, count, width)
  memra_cuda_scatter_add_rows: { args: [ptr, ptr, i64, ptr, i64, ptr, ptr, i64, i64], returns: i32 },

  // ---- sampling ----
  // (cuda, out, out_length, logits, logits_length, rows, columns)
  memra_cuda_argmax_rows: { args: [ptr, ptr, i64, ptr, i64, i64, i64], returns: i32 },
  memra_cuda_top_k_rows: { args: [ptr, ptr, i64, ptr, i64, ptr, i64, i64, i64, i64], returns: i32 },
  memra_cuda_log_softmax_at: { args: [ptr, ptr, i64, ptr, i64, i64, i64, ptr, i64], returns: i32 },

  // ---- graphs ----
  memra_cuda_graph_begin: { args: [ptr], returns: i32 },
  // (cuda, graph_out)
  memra_cuda_graph_end: { args: [ptr, ptr], returns: i32 },
  memra_cuda_graph_abort: { args: [ptr], returns: i32 },
  // (cuda, graph, inputs, nodes, workspace_bytes)
  memra_cuda_graph_info: { args: [ptr, ptr, ptr, ptr, ptr], returns: i32 },
  // (cuda, graph, index, host, bytes)
  memra_cuda_graph_input: { args: [ptr, ptr, i64, ptr, ptr], returns: i32 },
  // (cuda, graph, hosts, bytes, count)
  memra_cuda_graph_replay: { args: [ptr, ptr, ptr, ptr, i64], returns: i32 },
  memra_cuda_graph_destroy: { args: [ptr, ptr], returns: i32 },
} as const;

export type MemraCudaSymbols = Library<typeof MEMRA_CUDA_SYMBOLS>["symbols"];

/** Entry points that return an int status. */
export type CudaStatusSymbol = Exclude<
  keyof typeof MEMRA_CUDA_SYMBOLS,
  | "memra_cuda_version"
  | "memra_cuda_abi_version"
  | "memra_cuda_last_error"
  | "memra_cuda_last_status"
  | "memra_cuda_supports"
  | "memra_cuda_create"
  | "memra_cuda_destroy"
  | "memra_cuda_alloc"
  | "memra_cuda_repacked_type_of"
>;

/** enum memra_cuda_op, by backend op name. */
export const MEMRA_CUDA_OPS = {
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

/** MEMRA_CUDA_NO_WEIGHT_TYPE */
export const CUDA_NO_WEIGHT_TYPE = -1;

function traced(symbols: MemraCudaSymbols): MemraCudaSymbols {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(symbols) as [string, (...args: unknown[]) => unknown][]) {
    const signature = MEMRA_CUDA_SYMBOLS[name as keyof typeof MEMRA_CUDA_SYMBOLS];
    wrapped[name] = (...args: unknown[]) => {
      const started = performance.now();
      const result = fn(...args);
      const microseconds = ((performance.now() - started) * 1000).toFixed(1);
      const shown = args
        .map((value, i) => (signature.args[i] === FFIType.ptr && typeof value === "number" ? `0x${value.toString(16)}` : value === null ? "NULL" : String(value)))
        .join(", ");
      process.stderr.write(`[memra ffi] ${name}(${shown}) -> ${result === undefined ? "" : String(result)} ${microseconds} µs\n`);
      return result;
    };
  }
  return wrapped as MemraCudaSymbols;
}

/** The loaded library: raw symbols plus the checking wrapper. */
export class MemraCudaLibrary {
  readonly symbols: MemraCudaSymbols;

  constructor(
    private readonly library: Library<typeof MEMRA_CUDA_SYMBOLS>,
    /** The file it was loaded from. */
    readonly path: string,
    trace: boolean,
  ) {
    this.symbols = trace ? traced(library.symbols) : library.symbols;
  }

  /** Calls a status-returning entry point; throws CudaError with the library's message on failure. */
  call<K extends CudaStatusSymbol>(name: K, ...args: Parameters<MemraCudaSymbols[K]>): void {
    const status = (this.symbols[name] as (...values: unknown[]) => number)(...args);
    if (status !== 0) throw new CudaError(name, status, this.lastError());
  }

  lastError(): string {
    return String(this.symbols.memra_cuda_last_error() ?? "");
  }

  get version(): string {
    return String(this.symbols.memra_cuda_version());
  }

  /** Number of CUDA devices; throws CudaUnavailableError (with the driver's message) when there is no driver or GPU. */
  deviceCount(): number {
    const count = new Int32Array(1);
    const status = this.symbols.memra_cuda_device_count(count);
    if (status === CUDA_STATUS_NO_DEVICE) throw new CudaUnavailableError("no-device", this.lastError());
    if (status !== 0) throw new CudaError("memra_cuda_device_count", status, this.lastError());
    return count[0]!;
  }

  /** A context on `device`; CudaUnavailableError when there is no driver / GPU / such device. */
  createContext(device: number): Pointer {
    const handle = this.symbols.memra_cuda_create(device);
    if (handle === null || handle === 0) {
      const status = this.symbols.memra_cuda_last_status();
      if (status === CUDA_STATUS_NO_DEVICE) throw new CudaUnavailableError("no-device", this.lastError());
      throw new CudaError("memra_cuda_create", status, this.lastError());
    }
    return handle as Pointer;
  }

  close(): void {
    this.library.close();
  }
}

/** Where the library is looked for: MEMRA_CUDA_LIBRARY alone when set, else native/build of this checkout. */
export function cudaLibraryCandidates(): string[] {
  const override = process.env.MEMRA_CUDA_LIBRARY?.trim();
  if (override) return [override];
  return [fileURLToPath(new URL(`../../../native/build/libmemra_cuda.${suffix}`, import.meta.url))];
}

let opened: MemraCudaLibrary | undefined;

/**
 * Loads libmemra_cuda once per process.
 * @throws CudaUnavailableError when it is not built or does not load.
 */
export function openMemraCudaLibrary(path?: string): MemraCudaLibrary {
  if (opened && (path === undefined || opened.path === path)) return opened;
  const candidates = path ? [path] : cudaLibraryCandidates();
  const found = candidates.find((candidate) => existsSync(candidate));
  if (!found) {
    const how = process.env.MEMRA_CUDA_LIBRARY
      ? "MEMRA_CUDA_LIBRARY names a file that does not exist"
      : "build it with `bun native/build.ts cuda` (needs nvcc), or set MEMRA_CUDA_LIBRARY";
    throw new CudaUnavailableError("library-missing", `${candidates.join(", ")} not found; ${how}`);
  }
  let library: Library<typeof MEMRA_CUDA_SYMBOLS>;
  try {
    library = dlopen(found, MEMRA_CUDA_SYMBOLS);
  } catch (error) {
    throw new CudaUnavailableError("library-load-failed", `loading ${found} failed: ${(error as Error).message}`);
  }
  const abi = library.symbols.memra_cuda_abi_version();
  if (abi !== MEMRA_CUDA_ABI_VERSION) {
    library.close();
    throw new CudaUnavailableError("library-load-failed", `${found} has ABI version ${abi}, this package needs ${MEMRA_CUDA_ABI_VERSION}: rebuild it`);
  }
  const loaded = new MemraCudaLibrary(library, found, process.env.MEMRA_FFI_TRACE === "1");
  if (path === undefined) opened = loaded;
  return loaded;
}
