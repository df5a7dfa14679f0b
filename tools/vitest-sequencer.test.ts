import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SECONDS, listedSeconds } from "../vitest.sequencer";

const ROOT = join(import.meta.dirname, "..");

describe("the test-file order (vitest.sequencer.ts)", () => {
  it("lists only files that exist, so a renamed long file does not silently start last again", () => {
    const missing = Object.keys(SECONDS).filter((file) => !existsSync(join(ROOT, file)));
    expect(missing).toEqual([]);
  });

  it("finds a file's duration by its path under the root, 0 for a file not listed", () => {
    expect(listedSeconds(ROOT, join(ROOT, "packages/cpu-ffi/src/golden-suite.test.ts"))).toBeGreaterThan(100);
    expect(listedSeconds(ROOT, join(ROOT, "packages/gguf/src/read-gguf.ts"))).toBe(0);
  });
});
