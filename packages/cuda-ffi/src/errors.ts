/** Status codes of native/include/memra_cuda.h (enum memra_cuda_status), by value. */
export const CUDA_STATUS_NAMES: Readonly<Record<number, string>> = {
  1: "MEMRA_CUDA_ERROR_INVALID_ARGUMENT",
  2: "MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE",
  3: "MEMRA_CUDA_ERROR_OUT_OF_RANGE",
  4: "MEMRA_CUDA_ERROR_OUT_OF_MEMORY",
  6: "MEMRA_CUDA_ERROR_UNSUPPORTED",
  7: "MEMRA_CUDA_ERROR_NO_DEVICE",
  8: "MEMRA_CUDA_ERROR_CUDA",
};

/** MEMRA_CUDA_ERROR_NO_DEVICE */
export const CUDA_STATUS_NO_DEVICE = 7;

/**
 * CUDA cannot be used here: libmemra_cuda is not built or does not load, there is no driver, no
 * GPU, or no device with the requested index. The message carries the driver's own words.
 */
export class CudaUnavailableError extends Error {
  override readonly name = "CudaUnavailableError";
  constructor(
    /** "library-missing": not built; "library-load-failed": dlopen failed or ABI mismatch; "no-device": no driver / GPU / such device. */
    readonly kind: "library-missing" | "library-load-failed" | "no-device",
    reason: string,
  ) {
    super(`CUDA is unavailable: ${reason}`);
  }
}

/** A libmemra_cuda entry point returned an error code; the message is memra_cuda_last_error(). */
export class CudaError extends Error {
  override readonly name = "CudaError";
  constructor(
    /** The C function that failed, e.g. "memra_cuda_matmul". */
    readonly symbol: string,
    /** Its status (enum memra_cuda_status). */
    readonly status: number,
    /** memra_cuda_last_error() right after the call. */
    readonly nativeMessage: string,
  ) {
    super(`${nativeMessage || `${symbol} failed`} (${CUDA_STATUS_NAMES[status] ?? `status ${status}`})`);
  }
}

/** A CudaBackend was used after dispose(). */
export class CudaBackendDisposedError extends Error {
  override readonly name = "CudaBackendDisposedError";
  constructor() {
    super("the cuda backend was disposed");
  }
}
