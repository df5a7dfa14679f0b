import { ReferenceBackend } from "../reference-backend";
import { defineGoldenSuite } from "./golden-suite";

// The second half of golden-suite-part-1.test.ts's suite (why every 4th step: see there).
defineGoldenSuite({ name: "reference", create: () => new ReferenceBackend(), shard: { index: 1, count: 2 }, stepStride: 4 });
