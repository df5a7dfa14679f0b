/** Status codes of native/include/memra.h (enum memra_status), by value. */
export const NATIVE_STATUS_NAMES: Readonly<Record<number, string>> = {
  1: "MEMRA_ERROR_INVALID_ARGUMENT",
  2: "MEMRA_ERROR_UNSUPPORTED_TYPE",
  3: "MEMRA_ERROR_OUT_OF_RANGE",
  4: "MEMRA_ERROR_OUT_OF_MEMORY",
  5: "MEMRA_ERROR_THREAD",
};

/** A native entry point returned an error code; the message is the library's memra_last_error(). */
export class NativeError extends Error {
  override readonly name = "NativeError";
  constructor(
    /** The C function that failed, e.g. "memra_cpu_matmul". */
    readonly symbol: string,
    /** Its status code (enum memra_status). */
    readonly status: number,
    /** memra_last_error() right after the call. */
    readonly nativeMessage: string,
  ) {
    super(`${nativeMessage || `${symbol} failed`} (${NATIVE_STATUS_NAMES[status] ?? `status ${status}`})`);
  }
}

/** The native CPU library (libmemra_cpu) is not built, not found, or cannot be loaded. */
export class NativeLibraryUnavailableError extends Error {
  override readonly name = "NativeLibraryUnavailableError";
  constructor(
    /** The paths that were tried. */
    readonly candidates: readonly string[],
    /** "missing": no file (not built); "load-failed": dlopen failed; "abi-mismatch": built from other headers. */
    readonly kind: "missing" | "load-failed" | "abi-mismatch",
    reason: string,
  ) {
    super(`the native CPU library is unavailable: ${reason}`);
  }
}

/** A CpuBackend was used after dispose(). */
export class BackendDisposedError extends Error {
  override readonly name = "BackendDisposedError";
  constructor(backend: string) {
    super(`the ${backend} backend was disposed`);
  }
}


/** (defined in @memra/core: every backend's KV storage throws it) */
export { KVStorageDisposedError } from "@memra/core";
