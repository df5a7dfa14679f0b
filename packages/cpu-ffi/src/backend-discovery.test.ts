import { createDefaultBackend } from "@memra/core";
import { resetBackendDiscoveryWarning } from "@memra/core/internal";
import { describe, expect, it } from "vitest";
import { CpuBackend } from "./cpu-backend";
import { nativeLibraryUnavailableReason } from "./native-availability";

const unavailable = nativeLibraryUnavailableReason();

describe.skipIf(unavailable !== undefined)(`createDefaultBackend finds this package${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  it("returns a CpuBackend when @memra/cpu-ffi loads and its library is built", async () => {
    resetBackendDiscoveryWarning();
    const backend = await createDefaultBackend({ threads: 2, importCpuBackend: () => import("./index"), warn: (message) => expect.fail(message) });
    expect(backend).toBeInstanceOf(CpuBackend);
    expect((backend as CpuBackend).threads).toBe(2);
    backend.dispose();
  });
});
