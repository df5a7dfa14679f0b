import type { Backend } from "../backend";
import { ReferenceBackend } from "../reference-backend";
import { defineContextShiftSuite } from "./context-shift-golden";

// Every model and a generation run on the native CPU backend (@memra/cpu-ffi), whose rotateKV moves
// and rotates the keys in place. Here the reference backend runs the YaRN model's scenarios, with
// the counterexamples, without its rotateKV: the keys go through the host (Transformer.shiftCache's
// path for a backend without the op). The reference's rotateKV is checked against the CPU's by the
// op tests.
const withoutRotateKV = (): Backend => Object.assign(new ReferenceBackend(), { rotateKV: undefined });
defineContextShiftSuite({ name: "reference, keys shifted on the host", create: withoutRotateKV, only: ["dense-yarn-f32"], counterExamples: true });
