export { Tokenizer, type DecodeOptions, type EncodeOptions, type FillInMiddleTokens } from "./tokenizer";
export type { TokenizerVocabulary } from "./tokenizer-vocabulary";
export { TokenizerError } from "./tokenizer-error";
export { type MetadataGetter, vocabularyFromGGUFMetadata } from "./vocabulary-from-gguf-metadata";
export { type ResolvedTokenAttributes, TokenAttribute, TokenType, resolveTokenAttributes } from "./token-attributes";
export { PRE_TOKENIZERS, type PreTokenizer, findPreTokenizer } from "./pre-tokenizers";
export { StreamingDecoder } from "./streaming-decoder";
export {
  CHATML_TEMPLATE,
  type ChatMessage,
  ChatTemplate,
  type ChatTemplateOptions,
  type ChatToolCall,
  type ChatToolDefinition,
} from "./chat-template";
export { type ReasoningSplit, ReasoningSplitter, type ReasoningSplitterOptions, splitReasoning } from "./reasoning-splitter";
export { type TokenizeCommandIO, type TokenizeCommandOptions, runTokenizeCommand } from "./tokenize-command";
export { type ParsedToolCall, type ToolCallSplit, ToolCallSplitter, type ToolCallSplitterOptions, parseToolCalls } from "./tool-calls";
