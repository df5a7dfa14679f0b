import { type Backend, createDefaultBackend } from "@memra/core";

/**
 * The backend the CLI computes on: the native CPU backend (@memra/cpu-ffi, a dependency of the CLI)
 * when its library is built, else the reference backend with core's one-line warning. The import is
 * passed from here because core cannot see @memra/cpu-ffi in an isolated install.
 */
export function chooseBackend(threads: number | undefined): Promise<Backend> {
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
