import { ReferenceBackend } from "../reference-backend";
import { defineContextShiftSuite } from "./context-shift-golden";

// Every model and a generation run on the native CPU backend (@memra/cpu-ffi); the reference
// backend runs the YaRN model's scenarios, with the counterexamples.
defineContextShiftSuite({ name: "reference", create: () => new ReferenceBackend(), only: ["dense-yarn-f32"], counterExamples: true });
