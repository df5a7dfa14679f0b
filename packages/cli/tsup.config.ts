import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts", "src/main.ts"],
  format: ["esm"],
  dts: { entry: "src/index.ts" },
  clean: true,
  sourcemap: true,
  target: "es2022",
  // Workspace-only (private, dev): loaded at run time when present for the demo model, never bundled.
  external: ["@memra/synthetic"],
});
