/**
 * Finds a backend at run time: the native CPU backend (@memra/cpu-ffi) when it is installed and
 * its library is built, otherwise the reference backend, with one warning on stderr per process.
 * Core never imports a native backend statically (DESIGN.md: core runs without native code); the
 * import below is dynamic and its specifier is not a literal, so neither TypeScript nor the bundler
 * resolves it at build time.
 */
import type { Backend } from "./backend";
import { ReferenceBackend } from "./reference-backend";

export const CPU_BACKEND_PACKAGE = "@memra/cpu-ffi";

/** The part of @memra/cpu-ffi this module uses. */
export interface CpuBackendModule {
  readonly CpuBackend: { create(options?: { threads?: number }): Backend };
}

export interface DefaultBackendOptions {
  /** Threads for the native backend (default: its own default, one per processor). */
  readonly threads?: number;
  /** Loads the native backend's module (default: `import("@memra/cpu-ffi")`); for tests and bundlers. */
  readonly importCpuBackend?: () => Promise<CpuBackendModule>;
  /** Where the one-time warning goes (default: stderr). */
  readonly warn?: (message: string) => void;
}

let warned = false;

function isModuleNotFound(error: unknown, specifier: string): boolean {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: string } | null)?.code;
  return (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND" || /Cannot find (module|package)/i.test(message)) && message.includes(specifier);
}

function isLibraryUnavailable(error: unknown): boolean {
  return error instanceof Error && error.name === "NativeLibraryUnavailableError";
}

/**
 * The fastest backend available here: CpuBackend from @memra/cpu-ffi, or the reference backend when
 * that package is not installed or its native library is not built (warning once on stderr).
 * Other failures (a broken library, a context that cannot be created) are thrown.
 */
export async function createDefaultBackend(options: DefaultBackendOptions = {}): Promise<Backend> {
  const specifier = CPU_BACKEND_PACKAGE;
  const load = options.importCpuBackend ?? (() => import(/* @vite-ignore */ specifier) as Promise<CpuBackendModule>);
  let reason: string;
  try {
    const module = await load();
    return module.CpuBackend.create(options.threads === undefined ? {} : { threads: options.threads });
  } catch (error) {
    if (isModuleNotFound(error, specifier)) {
      reason = `${specifier} is not installed`;
    } else if (isLibraryUnavailable(error)) {
      reason = (error as Error).message;
    } else {
      throw error;
    }
  }
  if (!warned) {
    warned = true;
    const warn = options.warn ?? ((message: string) => process.stderr.write(`${message}\n`));
    warn(`memra: using the reference (TypeScript) backend, which is slow: ${reason}.`);
  }
  return new ReferenceBackend();
}

/** Lets the next fallback warn again (tests). */
export function resetBackendDiscoveryWarning(): void {
  warned = false;
}
