export { type ImportanceSelection, type QuantizationImportance, quantizationImportance } from "./importance";
export { LLAMA_FILE_TYPES, type LlamaFileType, llamaFileTypeName, parseLlamaFileType } from "./llama-ftype";
export {
  type PlannedTensor,
  type QuantizationOptions,
  type QuantizationPlan,
  QuantizationError,
  type TensorTypeOverride,
  parseTensorType,
  planQuantization,
} from "./plan";
export { type QuantizationReport, type QuantizeModelOptions, type RowDequantizer, type RowQuantizer, quantizeModel } from "./quantize-model";
