export { CpuBackend, type CpuBackendOptions } from "./cpu-backend";
export { BackendDisposedError, KVStorageDisposedError, NATIVE_STATUS_NAMES, NativeError, NativeLibraryUnavailableError } from "./errors";
export { MEMRA_ABI_VERSION, MEMRA_CPU_SYMBOLS, MEMRA_OPS, type MemraCpuLibrary, libraryCandidates, openMemraCpuLibrary } from "./native-library";
export { type NativeQuantizer, createNativeQuantizer } from "./native-quantizer";
