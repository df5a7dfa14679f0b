// Importing this package loads nothing: libmemra_cuda is opened on first use (CudaBackend.create,
// cudaAvailable), so it imports fine on machines without a GPU, a driver or the built library.
export { CudaBackend, type CudaBackendOptions } from "./cuda-backend";
export { cudaAvailable, cudaUnavailableReason } from "./cuda-availability";
export { CUDA_STATUS_NAMES, CudaBackendDisposedError, CudaError, CudaUnavailableError } from "./errors";
export { MEMRA_CUDA_ABI_VERSION, MEMRA_CUDA_OPS, MEMRA_CUDA_SYMBOLS, type MemraCudaLibrary, cudaLibraryCandidates, openMemraCudaLibrary } from "./native-library";
