import { beforeEach, describe, expect, it } from "vitest";
import type { Backend } from "./backend";
import { createDefaultBackend, resetBackendDiscoveryWarning } from "./backend-discovery";
import { ReferenceBackend } from "./reference-backend";

class NativeLibraryUnavailableError extends Error {
  override readonly name = "NativeLibraryUnavailableError";
}

describe("createDefaultBackend", () => {
  beforeEach(() => resetBackendDiscoveryWarning());

  it("returns the native CPU backend when its module loads", async () => {
    const native = { name: "cpu" } as Backend;
    let threads: number | undefined;
    const backend = await createDefaultBackend({
      threads: 3,
      importCpuBackend: async () => ({
        CpuBackend: {
          create: (options) => {
            threads = options?.threads;
            return native;
          },
        },
      }),
    });
    expect(backend).toBe(native);
    expect(threads).toBe(3);
  });

  it("falls back to the reference backend, warning once, when the package is missing or its library is not built", async () => {
    const warnings: string[] = [];
    const warn = (message: string) => warnings.push(message);
    const missingPackage = async () => {
      throw Object.assign(new Error("Cannot find package '@memra/cpu-ffi' from '/app/index.ts'"), { code: "ERR_MODULE_NOT_FOUND" });
    };
    const notBuilt = async () => ({
      CpuBackend: {
        create: (): Backend => {
          throw new NativeLibraryUnavailableError("the native CPU library is unavailable: native/build/libmemra_cpu.so not found");
        },
      },
    });
    expect(await createDefaultBackend({ importCpuBackend: missingPackage, warn })).toBeInstanceOf(ReferenceBackend);
    expect(await createDefaultBackend({ importCpuBackend: notBuilt, warn })).toBeInstanceOf(ReferenceBackend);
    expect(warnings).toEqual(["memra: using the reference (TypeScript) backend, which is slow: @memra/cpu-ffi is not installed."]);
  });

  it("rethrows other failures", async () => {
    const broken = async () => ({
      CpuBackend: {
        create: (): Backend => {
          throw new Error("memra_cpu_create: could not start worker thread 1 of 3");
        },
      },
    });
    await expect(createDefaultBackend({ importCpuBackend: broken, warn: () => {} })).rejects.toThrow(/worker thread/);
  });

  it("runs without any native package in this workspace (core does not depend on one)", async () => {
    const warnings: string[] = [];
    const backend = await createDefaultBackend({ warn: (message) => warnings.push(message) });
    expect(backend.name === "cpu" || backend instanceof ReferenceBackend).toBe(true);
    backend.dispose();
  });
});
