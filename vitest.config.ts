import { defineConfig } from "vitest/config";
import LongestFirstSequencer from "./vitest.sequencer.ts";

export default defineConfig({
  // Resolve workspace packages to their TypeScript sources (the "bun" export condition), so tests
  // never need a build first.
  resolve: { conditions: ["bun", "import", "default"] },
  ssr: { resolve: { conditions: ["bun", "import", "default"], externalConditions: ["bun"] } },
  test: {
    include: ["packages/*/src/**/*.test.ts", "tools/**/*.test.ts", "bench/**/*.test.ts"],
    exclude: ["**/node_modules/**", "tools/llamacpp/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    pool: "forks",
    // Both cores: the golden suite is split in two files so that it runs on both.
    maxWorkers: 2,
    // The long files first (vitest.sequencer.ts), so that none starts last while the other worker idles.
    sequence: { sequencer: LongestFirstSequencer },
  },
});
