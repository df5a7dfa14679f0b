/**
 * Whether libmemra_cpu can be loaded here, for tests that need it. They skip, naming the reason,
 * only when the library file is missing (not built, e.g. no C compiler); a library that exists but
 * does not load is an error. MEMRA_REQUIRE_NATIVE=1 (for CI, which builds it) turns a missing
 * library into an error too.
 */
import { NativeLibraryUnavailableError } from "./errors";
import { openMemraCpuLibrary } from "./native-library";

export function nativeLibraryUnavailableReason(): string | undefined {
  try {
    openMemraCpuLibrary();
    return undefined;
  } catch (error) {
    if (error instanceof NativeLibraryUnavailableError && error.kind === "missing" && process.env.MEMRA_REQUIRE_NATIVE !== "1") return error.message;
    throw error;
  }
}
