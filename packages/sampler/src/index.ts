export { Candidates, gatherCandidates, selectTopIndices, softmax, sortCandidates } from "./candidates";
export { type SampleResult, type Sampler, type SamplerContext, createSampler, isPlainGreedy, topCandidatesSuffice } from "./sampler";
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
export { topNSigma } from "./top-n-sigma";
export { MIROSTAT_M, mirostat, mirostatInitialMu, mirostatUpdate, mirostatV2 } from "./mirostat";
export { topP } from "./top-p";
export { minP } from "./min-p";
export { xtc } from "./xtc";
export { temperature } from "./temperature";
export { pickDistribution, pickGreedy } from "./pick";
export { argmax, logSumExp } from "./log-sum-exp";
export { SeededRandom, randomSeed } from "./seeded-random";
export { type StopSequenceStep, StopSequenceMatcher } from "./stop-sequence-matcher";
export { InvalidSamplingOptionError, SamplerError } from "./sampler-error";
export { type CharacterClass, type Grammar, type GrammarSymbol } from "./grammar/grammar";
export { GrammarError, GrammarSyntaxError, JsonSchemaError } from "./grammar/grammar-error";
export { MAX_GRAMMAR_SYMBOLS, MAX_REPETITION, type ParseGbnfOptions, parseGbnf } from "./grammar/parse-gbnf";
export { validateGrammar } from "./grammar/validate-grammar";
export { GrammarAutomaton, MAX_STACKS_PER_STATE } from "./grammar/grammar-automaton";
export { TokenTrie } from "./grammar/token-trie";
export { type AllowedTokens, type GrammarPosition, GrammarMatcher } from "./grammar/grammar-matcher";
export { type ConstrainedSampler, type GrammarMode, createConstrainedSampler } from "./grammar/constrained-sampler";
export { type LeadingBlock, type TriggeredSampler, type TriggeredSamplerOptions, createTriggeredSampler } from "./grammar/triggered-sampler";
export {
  type ToolCallFunction,
  type ToolCallGrammarOptions,
  gbnfLiteral,
  grammarFromJsonSchema,
  jsonSchemaToGbnf,
  toolCallGbnf,
} from "./grammar/json-schema-to-gbnf";
export {
  type OutputConstraint,
  type ResponseFormat,
  constraintFromGbnf,
  constraintFromJsonSchema,
  constraintFromResponseFormat,
  constraintFromSchema,
  constraintFromZod,
  isZodSchema,
  zodToJsonSchema,
} from "./grammar/structured-output";
