import { ReferenceBackend } from "../reference-backend";
import { defineGoldenSuite } from "./golden-suite";

// Split in two files so that vitest's two workers share the suite. The reference backend's LM head
// (151,936 rows, double-precision sums in TypeScript) is ~10 s a model over all 32 steps of the 8
// prompts: it compares every 4th step and each prompt's last (9 of 32, every position still run).
// The native backends compare every step; scripts/measure-golden-drift.ts compares the reference's.
defineGoldenSuite({ name: "reference", create: () => new ReferenceBackend(), shard: { index: 1, count: 2 }, stepStride: 4 });
