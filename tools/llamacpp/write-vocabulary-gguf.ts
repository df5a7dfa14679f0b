#!/usr/bin/env bun
// Writes the vocabulary-only Qwen3 GGUF that the tokenizer scripts of this folder load into
// llama.cpp: the `tokenizer.*` metadata exactly as @memra/synthetic puts it into its model files
// (the Qwen3 vocabulary laid out as convert_hf_to_gguf.py writes it), written by @memra/gguf, plus
// the hyperparameters of a tiny Qwen3 so that node-llama-cpp's memory estimate can read the file.
// No tensors. `--pre` replaces `tokenizer.ggml.pre` (llama.cpp's "llama-bpe", "gpt-2", … to run the
// same vocabulary through another pre-tokenizer).
//
// Prints one JSON line: { path, preTokenizer, bytes, fingerprint, size, merges }, where fingerprint
// is the tokenizer tests' vocabularyFingerprint of the vocabulary read back from the written file.
//
//   bun tools/llamacpp/write-vocabulary-gguf.ts [--pre qwen2] --out FILE
//
// Bun, not node (the packages are TypeScript). The workspace packages are imported by relative
// path: tools/llamacpp is outside the Bun workspace, so "@memra/*" does not resolve from here.
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { type GGUFValue, TOKENIZER_KEYS, ggufValue, openGGUF, writeGGUFFile } from "../../packages/gguf/src/index";
import { loadQwen3Vocabulary, qwen3TokenizerMetadata } from "../../packages/synthetic/src/index";
import { vocabularyFingerprint } from "../../packages/tokenizer/src/__fixtures__/qwen3-vocabulary";
import { vocabularyFromGGUFMetadata } from "../../packages/tokenizer/src/index";

const { values } = parseArgs({
  options: {
    pre: { type: "string", default: "qwen2" },
    out: { type: "string" },
  },
  strict: true,
});
if (!values.out) {
  console.error("usage: bun tools/llamacpp/write-vocabulary-gguf.ts [--pre qwen2] --out FILE");
  process.exit(2);
}
const path = resolve(values.out);
const preTokenizer = values.pre;

const tokenizerMetadata = qwen3TokenizerMetadata().map(([key, value]): [string, GGUFValue] =>
  key === TOKENIZER_KEYS.pre ? [key, ggufValue.string(preTokenizer)] : [key, value],
);
if (!tokenizerMetadata.some(([key]) => key === TOKENIZER_KEYS.pre)) throw new Error("qwen3TokenizerMetadata() has no tokenizer.ggml.pre");

const metadata = new Map<string, GGUFValue>([
  ["general.architecture", ggufValue.string("qwen3")],
  ["general.name", ggufValue.string("memra qwen3 tokenizer (vocabulary only)")],
  // Hyperparameters of a tiny Qwen3, so that node-llama-cpp's memory estimate can read the file.
  ["qwen3.context_length", ggufValue.uint32(40960)],
  ["qwen3.embedding_length", ggufValue.uint32(64)],
  ["qwen3.block_count", ggufValue.uint32(1)],
  ["qwen3.feed_forward_length", ggufValue.uint32(128)],
  ["qwen3.attention.head_count", ggufValue.uint32(2)],
  ["qwen3.attention.head_count_kv", ggufValue.uint32(1)],
  ["qwen3.attention.key_length", ggufValue.uint32(32)],
  ["qwen3.attention.value_length", ggufValue.uint32(32)],
  ["qwen3.attention.layer_norm_rms_epsilon", ggufValue.float32(1e-6)],
  ["qwen3.rope.freq_base", ggufValue.float32(1000000)],
  ...tokenizerMetadata,
]);

const bytes = await writeGGUFFile(path, { metadata });

// Read the file back: the fingerprint is of what llama.cpp will load, and must equal the one of the
// vocabulary the tokenizer tests build (loadQwen3Vocabulary).
const file = openGGUF(path);
const written = vocabularyFromGGUFMetadata((key) => file.get(key));
const fingerprint = vocabularyFingerprint(written);
const expected = loadQwen3Vocabulary();
if (fingerprint !== vocabularyFingerprint({ model: "gpt2", preTokenizer, ...expected })) {
  throw new Error(`${path}: the vocabulary read back differs from loadQwen3Vocabulary()`);
}
console.log(JSON.stringify({ path, preTokenizer, bytes, fingerprint, size: written.tokens.length, merges: written.merges.length }));
