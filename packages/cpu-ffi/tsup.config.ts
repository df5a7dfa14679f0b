import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  // Bun's built-in module: resolved at run time by Bun, never bundled.
  external: ["bun:ffi"],
});
