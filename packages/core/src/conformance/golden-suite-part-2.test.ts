import { ReferenceBackend } from "../reference-backend";
import { defineGoldenSuite } from "./golden-suite";

defineGoldenSuite({ name: "reference", create: () => new ReferenceBackend(), shard: { index: 1, count: 2 } });
