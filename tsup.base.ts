import { type Options, defineConfig } from "tsup";

/** The build every @memra package shares: ESM + .d.ts from src/index.ts; `overrides` for the few differences. */
export function packageBuildConfig(overrides: Options = {}) {
  return defineConfig({
    entry: ["src/index.ts"],
    format: ["esm"],
    dts: true,
    clean: true,
    sourcemap: true,
    target: "es2022",
    ...overrides,
  });
}
