export { SeededRandom, hashString, mulberry32 } from "./random";
export { MIN_TRUNCATED_VOCABULARY, QWEN3_VOCAB_SIZE, type Qwen3Vocabulary, loadQwen3Vocabulary, qwen3TokenizerMetadata, truncatedQwen3Vocabulary } from "./qwen3-vocabulary";
export {
  GENERATOR_VERSION,
  PRESETS,
  type PresetName,
  type SyntheticModelOptions,
  WEIGHT_TYPES,
  type WeightType,
  buildSyntheticModel,
  resolveOptions,
  validateOptions,
} from "./synthetic-model";
export { generateOnce, syntheticCacheDirectory, syntheticModelFile, syntheticModelKey } from "./model-cache";
export { LORA_TARGETS, type LoraTarget, type SyntheticLoraOptions, buildSyntheticLora, syntheticLoraFile } from "./synthetic-lora";
export { syntheticImatrix } from "./synthetic-imatrix";
