export { GGMLType, GGML_TYPES, QK_K, type GGMLTypeInfo, ggmlTypeFromName, ggmlTypeInfo, ggmlTypeName, tensorByteSize } from "./ggml-type";
export { GGUFError } from "./gguf-error";
export { GGUFFile, type GGUFFileContents, type GGUFTensorInfo } from "./gguf-file";
export {
  GGUFValueType,
  type GGUFArrayItems,
  type GGUFArrayValue,
  type GGUFPlainValue,
  type GGUFValue,
  type GGUFValueTypeName,
  ggufValue,
  jsonValue,
  plainValue,
} from "./gguf-value";
export { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_MAX_ARRAY_DEPTH, GGUF_MAX_DIMS, type OpenGGUFOptions, openGGUF, readGGUF } from "./read-gguf";
export { type GGUFTensorToWrite, type GGUFToWrite, writeGGUF, writeGGUFFile } from "./write-gguf";
export { type MetadataOverride, MetadataOverrideError, applyMetadataOverrides, parseMetadataOverride, quantizeOverrideValue } from "./metadata-override";
export {
  GGUFSplitFile,
  SPLIT_KEYS,
  type SplitOptions,
  type SplitPlan,
  mergeGGUF,
  openGGUFModel,
  planSplit,
  splitGGUF,
  splitInfo,
  splitPath,
  splitPrefix,
} from "./split-gguf";
export { ARCHITECTURE_KEYS, GENERAL_KEYS, TOKENIZER_KEYS, TokenType, architectureKey } from "./metadata-keys";
export {
  type ModelConfig,
  type Qwen3Config,
  type Qwen3MoeConfig,
  SUPPORTED_ARCHITECTURES,
  qwen3ConfigSchema,
  qwen3MoeConfigSchema,
  readModelConfig,
} from "./model-config";
export * from "./quant";
export * from "./quantize-model/index";
export * from "./imatrix/index";
