import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

// On the GPU machine (no Bun, no vitest: bench/device/bundle.sh) run.sh runs the test files with
// `bun test`. Bun gives test files a `vitest` of its own, but the helpers they import resolve the
// packed stand-in, which re-exports only some of bun:test's functions: a helper importing anything
// else from vitest fails there, and only there. Checked here, where every test runs on vitest.
const root = join(import.meta.dirname, "../..");
const bundle = readFileSync(join(root, "bench/device/bundle.sh"), "utf8");
const runScript = readFileSync(join(root, "bench/device/run.sh"), "utf8");

function sources(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "dist") continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...sources(path));
    else if (/\.(ts|mts|js|mjs)$/.test(entry.name)) files.push(path);
  }
  return files;
}

describe("the GPU machine's bundle (bench/device/bundle.sh)", () => {
  it("the vitest stand-in exports every name that a module other than a test file imports from vitest", () => {
    const exported = /export \{ ([^}]*) \} from "bun:test"/.exec(bundle)?.[1]?.split(/,\s*/);
    expect(exported, "the stand-in's export line in bundle.sh").toBeDefined();
    const helpers = [...sources(join(root, "packages")), ...sources(join(root, "bench"))].filter((file) => !/\.test\.ts$/.test(file));
    const missing: string[] = [];
    let importers = 0;
    for (const file of helpers) {
      for (const match of readFileSync(file, "utf8").matchAll(/import\s*(type\s*)?\{([^}]*)\}\s*from\s*"vitest"/g)) {
        if (match[1]) continue; // types only: erased
        importers++;
        for (const name of match[2]!.split(",").map((part) => part.trim().replace(/^type\s+/, ""))) {
          if (name && !match[2]!.includes(`type ${name}`) && !exported!.includes(name.split(/\s+as\s+/)[0]!)) missing.push(`${relative(root, file)}: ${name}`);
        }
      }
    }
    expect(importers).toBeGreaterThan(0); // the golden suite's and the generation tests' helpers
    expect(missing).toEqual([]);
  });

  it("run.sh's test steps name test files that exist, for both runners", () => {
    const files = [...runScript.matchAll(/"\$TESTS\/([\w.-]+\.test\.ts)"/g)].map((match) => match[1]!);
    expect(files.length).toBeGreaterThanOrEqual(6);
    for (const file of files) expect(existsSync(join(root, "packages/cuda-ffi/src", file)), file).toBe(true);
    // vitest where it is installed (its vitest.mjs), else bun test; the stand-in has no vitest.mjs
    expect(runScript).toContain("if [ -e node_modules/vitest/vitest.mjs ]; then");
    expect(existsSync(join(root, "node_modules/vitest/vitest.mjs"))).toBe(true);
    expect(bundle).not.toMatch(/vitest\.mjs"?\s*>/);
  });
});
