#!/usr/bin/env node
// Regenerates packages/tokenizer/src/__fixtures__/llamacpp-tokenizer-goldens.json: llama.cpp's
// tokens (through node-llama-cpp) for the strings of tokenizer-corpus.mjs, with and without
// special-token parsing, its detokenized text, single-token pieces and special token ids.
//
// The vocabulary-only GGUF it loads (Qwen3's vocabulary as convert_hf_to_gguf.py writes it, the
// same metadata the synthetic models carry) is written by write-vocabulary-gguf.ts, run with bun,
// so bun must be on the PATH.
//
//   cd tools/llamacpp && npm install   (once)
//   node tools/llamacpp/tokenizer-goldens.mjs [--keep-gguf path.gguf]
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
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

/**
 * Writes the vocabulary-only Qwen3 GGUF (with `tokenizer.ggml.pre` = preTokenizer) through
 * write-vocabulary-gguf.ts, which uses @memra/gguf and @memra/synthetic under Bun. Returns what it
 * prints: { path, preTokenizer, bytes, fingerprint, size, merges }.
 */
export function writeVocabularyGGUF(path, preTokenizer = "qwen2") {
  const stdout = execFileSync("bun", [join(here, "write-vocabulary-gguf.ts"), "--pre", preTokenizer, "--out", resolve(path)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return JSON.parse(stdout.trim().split("\n").at(-1));
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
  const folder = mkdtempSync(join(tmpdir(), "memra-tokenizer-goldens-"));
  const ggufPath = keepIndex >= 0 ? args[keepIndex + 1] : join(folder, "qwen3-vocab.gguf");

  try {
    const vocabulary = writeVocabularyGGUF(ggufPath);
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
    pieceIds.add(vocabulary.size - 1);
    while (pieceIds.size < 700) pieceIds.add(Math.floor(random() * vocabulary.size));
    const pieces = [...pieceIds]
      .sort((a, b) => a - b)
      .map((id) => [id, model.detokenize([id], false), model.detokenize([id], true)]);

    const specialIds = [];
    for (let id = 151643; id < 151700; id++) specialIds.push(id);
    const goldens = {
      generatedBy: "tools/llamacpp/tokenizer-goldens.mjs",
      llamaCpp: { release: info.tag, nodeLlamaCpp: nodeLlamaCppVersion, buildType: llama.buildType },
      vocabulary: { fingerprint: vocabulary.fingerprint, size: vocabulary.size, merges: vocabulary.merges },
      specialTokens: {
        bos: model.tokens.bos ?? null,
        eos: model.tokens.eos ?? null,
        eot: model.tokens.eot ?? null,
        nl: model.tokens.nl ?? null,
        endOfGeneration: specialIds.filter((id) => model.isEogToken(id)),
        // llama_vocab_fim_pre / _suf / _mid, which /infill's prompt is built from.
        infill: { prefix: model.tokens.infill.prefix ?? null, suffix: model.tokens.infill.suffix ?? null, middle: model.tokens.infill.middle ?? null },
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
      writeVocabularyGGUF(path, preTokenizer);
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
