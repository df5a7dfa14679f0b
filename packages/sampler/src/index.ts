export { Candidates, gatherCandidates, selectTopIndices, softmax, sortCandidates } from "./candidates";
export { type SampleResult, type Sampler, type SamplerContext, createSampler } from "./sampler";
export {
  DEFAULT_DRY_SEQUENCE_BREAKERS,
  type ResolvedSamplingOptions,
  type SamplingOptions,
  samplingOptionsSchema,
} from "./sampling-options";
export { type LogitBias, PreparedLogitBias, applyLogitBias } from "./logit-bias";
export { type PenaltyOptions, applyPenalties, penaltiesEnabled } from "./penalties";
export { type DryOptions, DrySequenceBreakers, DryWorkspace, applyDry, dryEnabled } from "./dry";
export { topK } from "./top-k";
export { typical } from "./typical";
export { topP } from "./top-p";
export { minP } from "./min-p";
export { xtc } from "./xtc";
export { temperature } from "./temperature";
export { pickDistribution, pickGreedy } from "./pick";
export { argmax, logSumExp } from "./log-sum-exp";
export { SeededRandom, randomSeed } from "./seeded-random";
export { type StopSequenceStep, StopSequenceMatcher } from "./stop-sequence-matcher";
export { InvalidSamplingOptionError, SamplerError } from "./sampler-error";
