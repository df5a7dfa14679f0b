import { ReferenceBackend } from "../reference-backend";
import { defineGoldenSuite } from "./golden-suite";

// Split in two files so that vitest's two workers share the suite.
defineGoldenSuite({ name: "reference", create: () => new ReferenceBackend(), shard: { index: 0, count: 2 } });
