import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // Resolve workspace packages to their TypeScript sources (the "bun" export condition).
    conditions: ["bun"],
  },
  test: {
    include: ["packages/*/src/**/*.test.ts", "tools/**/*.test.ts"],
    exclude: ["**/node_modules/**", "tools/llamacpp/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    pool: "forks",
  },
});
