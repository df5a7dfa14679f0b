import { type Backend, ReferenceBackend, createDefaultBackend } from "@memra/core";
import { CliError } from "./cli-error";

export type BackendChoice = "auto" | "cuda" | "cpu" | "reference";

/** `--device` as given, named in the error when it is not one of the choices. */
export function parseBackendChoice(value: string | undefined): BackendChoice {
  if (value === undefined) return "auto";
  if (value === "auto" || value === "cuda" || value === "cpu" || value === "reference") return value;
  throw new CliError(`--device must be auto, cuda, cpu or reference, got "${value}"`);
}

/**
 * `--device` of the commands that place layers (generate, chat, serve, bench, plan): the choices
 * above, and "cpu+reference" (for testing a split on a machine without a GPU: the native CPU
 * backend stands in for the GPU, the reference backend for the host).
 */
export function parsePlacementDeviceChoice(value: string | undefined): BackendChoice | "cpu+reference" {
  return value === "cpu+reference" ? value : parseBackendChoice(value);
}

export const backendOptionHelp = `  --device D              auto (default: a CUDA GPU when there is one, else the native CPU backend
                          when its library is built, else the reference backend with a warning),
                          cuda, cpu, or reference (the TypeScript backend, slow)`;

/**
 * The backend the CLI computes on. "auto": a CUDA GPU when the driver reports one, else the native CPU backend (@memra/cpu-ffi, a dependency of
 * the CLI) when its library is built, else the reference backend with core's one-line warning; the
 * import is passed from here because core cannot see @memra/cpu-ffi in an isolated install.
 * "cpu" fails when the native backend is unavailable; "reference" is the TypeScript backend.
 */
export async function chooseBackend(threads: number | undefined, choice: BackendChoice = "auto"): Promise<Backend> {
  if (choice === "reference") return new ReferenceBackend();
  if (choice === "cuda" || choice === "auto") {
    // @memra/cuda-ffi loads nothing at import; cudaAvailable() asks the driver without throwing
    const cuda = await import("@memra/cuda-ffi");
    if (choice === "cuda") {
      try {
        return cuda.CudaBackend.create();
      } catch (error) {
        throw new CliError(`--device cuda: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (cuda.cudaAvailable()) return cuda.CudaBackend.create();
  }
  if (choice === "cpu") {
    try {
      const { CpuBackend } = await import("@memra/cpu-ffi");
      return CpuBackend.create(threads === undefined ? {} : { threads });
    } catch (error) {
      throw new CliError(`--device cpu: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return createDefaultBackend({
    ...(threads === undefined ? {} : { threads }),
    importCpuBackend: () => import("@memra/cpu-ffi"),
  });
}

/** The host backend of a split: the native CPU backend when its library is built, else the reference backend (warning once). */
export function chooseHostBackend(threads: number | undefined): Promise<Backend> {
  return createDefaultBackend({
    ...(threads === undefined ? {} : { threads }),
    importCpuBackend: () => import("@memra/cpu-ffi"),
  });
}

/** "cpu avx512vnni, 2 threads" or "reference", for reports. */
export function describeBackend(backend: Backend): string {
  const native = backend as Backend & { isa?: string; threads?: number };
  if (native.isa === undefined) return backend.name;
  return `${backend.name} ${native.isa}, ${native.threads} thread${native.threads === 1 ? "" : "s"}`;
}
