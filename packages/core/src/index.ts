export {
  type AttentionShape,
  BACKEND_CONTRACT_VERSION,
  TOP_K_ROWS_MAX,
  type Backend,
  type BackendGraph,
  type BackendOp,
  type DeviceBuffer,
  type KVLayerView,
  type KVStorage,
  type KVType,
  type ResidualNorm,
  type WeightHandle,
  kvRowBytes,
  kvRowRange,
  kvRowsOf,
  readHostKVRows,
  writeHostKVRows,
} from "./backend";
export { type CpuBackendModule, type DefaultBackendOptions, createDefaultBackend } from "./backend-discovery";
export { KVStorageDisposedError, ModelTensorError, UnsupportedArchitectureError, UnsupportedOpError, UnsupportedTensorTypeError } from "./errors";
export { type RopeScaling, type RopeScalingOptions, originalContextLength, resolveRopeScaling, ropeScalingOptionsSchema, scaledContextLength } from "./models/rope-scaling";
export { KVBlocksExhaustedError, type KVCache, KVCacheFullError, type KVPoolStorage } from "./kv-cache";
export { DEFAULT_BLOCK_TOKENS, KVBlockPool, type KVBlockPoolOptions, PagedKVCache } from "./paged-kv-cache";
export { type LoadModelOptions, Model, type ModelMemory, type PromptLogprobs, loadModel } from "./load-model";
export { type LoraAdapterOptions, LoraAdapterError } from "./models/lora";
export { type BatchEntry, type ForwardOptions, type ModelDimensions, type TopCandidates, Transformer } from "./models/qwen3";
export { ReferenceBackend, routeTopK } from "./reference-backend";
export {
  type Distribution,
  type KlDivergenceResult,
  type LogprobsResult,
  type KlDivergencePerToken,
  type PerplexityOptions,
  type PerplexityResult,
  type TokenLogprob,
  computeKlDivergence,
  computeLogprobs,
  computePerplexity,
  logSumExp,
  topLogprobs,
} from "./evaluation";
export {
  KL_DIVERGENCE_BASE_HEADER_BYTES,
  KL_DIVERGENCE_BASE_MAGIC,
  KlDivergenceBaseError,
  KlDivergenceBaseFile,
  type KlDivergenceFromBaseOptions,
  type SaveKlDivergenceBaseOptions,
  computeKlDivergenceFromBase,
  klDivergenceBaseRowLength,
  openKlDivergenceBase,
  quantizeLogProbabilities,
  saveKlDivergenceBase,
  scoredRowsPerWindow,
} from "./kl-divergence-base";
export { type StridedPerplexityResult, computeStridedPerplexity } from "./strided-perplexity";
export {
  type HellaswagResult,
  type HellaswagTaskResult,
  type MultipleChoiceResult,
  type MultipleChoiceTaskResult,
  TASK_CONTEXT_SEQUENCES,
  TaskScoringError,
  type TaskScoringOptions,
  type WinograndeResult,
  type WinograndeTaskResult,
  accuracyError,
  computeHellaswag,
  computeMultipleChoice,
  computeWinogrande,
  wilsonInterval,
} from "./task-scoring/compute-task-scores";
export {
  type HellaswagTask,
  MAX_MULTIPLE_CHOICE_ANSWERS,
  type MultipleChoiceTask,
  TaskFileError,
  type WinograndeTask,
  parseHellaswagFile,
  parseMultipleChoiceFile,
  parseWinograndeFile,
} from "./task-scoring/task-files";
export { MersenneTwister, hellaswagTaskOrder, sampledTaskOrder, uniformBelow } from "./task-scoring/task-selection";
export { type ScoringGroup, type ScoringProbe, scoreSequenceGroups } from "./task-scoring/score-sequences";
export { type ComputeImatrixOptions, IMATRIX_BATCH_TOKENS, IMATRIX_UBATCH_TOKENS, type ImatrixProgress, computeImatrix } from "./compute-imatrix";
export { IMATRIX_MIN_DENSE_ROWS, ImatrixCollector, type ImatrixCollectorOptions } from "./imatrix-collector";
export { type ChatResult, type ChatToolCallResult, ChatSession, type ChatSessionOptions, type ChatStream } from "./generation/chat-session";
export { type LoadedState, type SavedState } from "./generation/saved-state";
export { type KVStateFile, KVStateError, type KVStateHeader, convertKVRows, modelFingerprint, openKVStateFile, writeKVStateFile } from "./kv-state";
export {
  type ChatOptions,
  type GenerateOptions,
  InvalidOptionError,
  chatOptionsSchema,
  generateOptionsSchema,
  parseOptions,
} from "./generation/generation-options";
export type { FinishReason, GenerationChunk, GenerationResult, GenerationStream, GenerationTimings, StructuredGenerationResult } from "./generation/generation-types";
export { type GenerationConstraint, StructuredOutputError, createGenerationConstraint, modelTokenTrie, prepareOutputConstraint } from "./generation/output-constraint";
export { type ToolTurn, toolCallId, toolTurn } from "./generation/tool-choice";
export { DEFAULT_INFILL_BATCH_TOKENS, type InfillInput, type InfillLayout, InfillUnsupportedError, infillInputSchema, infillPromptTokens } from "./generation/infill";
export { type EmbedOptions, type Pooling, embedOptionsSchema } from "./generation/embeddings";
export { type Drafter, type SpeculativeOptions, type SpeculativeStatistics, checkDraftModel, lookupDraft } from "./generation/speculative";
export { CLASSIFIER_TENSOR, ClassifierHead, type RankOptions, type RankedDocument, rankOptionsSchema, rankedDocuments, rerankPrompt } from "./generation/rerank";
export { GrammarError, GrammarSyntaxError, JsonSchemaError } from "@memra/sampler";
export { type FootprintTensor, type LayerFootprint, type ModelFootprint, type ModelShape, type TensorBytes, footprintFromTensors, modelFootprint, modelShape } from "./placement/model-footprint";
export {
  DEFAULT_ACCELERATOR_RESERVE_BYTES,
  type DeviceUsage,
  type PlacementDevice,
  type PlacementDeviceKind,
  type PlacementOptions,
  type PlacementPlan,
  type PlannedLayer,
  planPlacement,
} from "./placement/plan-placement";
export { PlacementError, type PlacementShortfall, formatBytes } from "./placement/placement-error";
export { type BackendPlacement, bindPlacement, devicesInUse, hostAvailableBytes } from "./placement/backend-placement";
