/**
 * Internals shared with other Memra packages of this workspace (not published: the export has only
 * the "bun" condition and points at the sources): the golden conformance
 * suite, the prime gate and the kit of the backend op tests, so that every backend package runs
 * exactly the same checks.
 */
export { type GoldenComparison, type GoldenModelFile, type GoldenPrompt, compareWithGolden } from "./conformance/golden-comparison";
export { type ContextShiftSuiteBackend, defineContextShiftSuite, loadContextShiftGoldens, replayContextShift } from "./conformance/context-shift-golden";
export { IMATRIX_BOUNDS, type ImatrixDeviation, type ImatrixGoldenCase, type ImatrixGoldenSuiteBackend, defineImatrixGoldenSuite, imatrixCalibrationText, imatrixDeviation, imatrixGoldenPath, loadImatrixGoldens } from "./conformance/imatrix-golden";
export { type PerplexityTaskComparison, type PerplexityTaskGoldenCase, type PerplexityTaskSuiteBackend, TASK_TIE_BOUNDS, WINOGRANDE_SCORE_BOUNDS, comparePerplexityTaskCase, definePerplexityTaskGoldenSuite, loadPerplexityTaskGoldens } from "./conformance/perplexity-task-golden";
export { MARGIN_BOUND, PROBABILITY_BOUNDS, type GoldenSuiteBackend, defineGoldenSuite, loadGoldenSuite } from "./conformance/golden-suite";
export { type PrimeGateResult, primeGate } from "./testing/prime-gate";
export { resetBackendDiscoveryWarning } from "./backend-discovery";
export { residentFraction } from "./testing/resident-pages";
export { type GenerationStep, expectStepsClose, generationSteps } from "./testing/generation-steps";
export { type KVRowsCheck, expectKVRowsPortable, kvRowsCheck } from "./testing/kv-rows-check";
export { expectRotateKVMatches } from "./testing/rotate-kv-check";
export { ALL_GGML_TYPES, BackendPair, firstDifference, nmse, normals, pagedLayout, tensorInfo, weightBytes } from "./testing/backend-pair";
export { type EmbeddingGoldenModel, cosineSimilarity, loadEmbeddingGoldens } from "./testing/embedding-goldens";
export { type RerankGoldenModel, loadRerankGoldens } from "./testing/rerank-goldens";
