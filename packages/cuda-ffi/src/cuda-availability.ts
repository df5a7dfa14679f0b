/**
 * Whether CUDA can be used here, without throwing: the library loads and the driver reports at
 * least one device. Loads libmemra_cuda on first call (never at import).
 */
import { CudaUnavailableError } from "./errors";
import { openMemraCudaLibrary } from "./native-library";

/** Why CUDA cannot be used here (the CudaUnavailableError's message), or undefined when it can. */
export function cudaUnavailableReason(): string | undefined {
  try {
    openMemraCudaLibrary().deviceCount();
    return undefined;
  } catch (error) {
    if (error instanceof CudaUnavailableError) return error.message;
    return `CUDA is unavailable: ${(error as Error).message}`;
  }
}

/** true when a CudaBackend can be created here (a built library, a driver and a GPU). */
export function cudaAvailable(): boolean {
  return cudaUnavailableReason() === undefined;
}
