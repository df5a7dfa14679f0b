// llama.cpp's greedy generation speed on a GGUF file through node-llama-cpp (CPU, prebuilt binary),
// plain and with prompt-lookup speculative decoding, for tools/llamacpp/speculative-side-by-side.ts:
//
//   node tools/llamacpp/speculative-bench.mjs -m FILE --prompt-tokens 1,2,3 [-n 128] [-t 2]
//       [--mode plain|lookup] [--draft-max 8] [--ngram-min 2] [--ngram-max 4]
//
// plain: the prompt in one evaluation, then one single-token decode per generated token, each with
// its logits and a greedy pick in llama.cpp's native sampler (controlledEvaluate; see llama-bench.mjs
// for why not sequence.evaluate). lookup: llama.cpp's lookup decoding done the way llama-lookup and
// the server's speculative loop do it: the last token and up to --draft-max drafts (the tokens that
// followed the most recent earlier occurrence of the history's last n tokens, n from --ngram-max down
// to --ngram-min, the same rule as memra's ngram drafter) in one batch with a greedy pick at every
// position; the picks are kept while they equal the drafts; the rejected drafts' cells are erased
// from the KV cache. Prints one JSON line: tokens, tg tokens/s (generated after the first, over the
// time after the prompt), drafted and accepted counts. Each mode runs once untimed, then once timed.
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const { values } = parseArgs({
  options: {
    model: { type: "string", short: "m" },
    "prompt-tokens": { type: "string" },
    gen: { type: "string", short: "n", default: "128" },
    threads: { type: "string", short: "t", default: "2" },
    mode: { type: "string", default: "plain" },
    "draft-max": { type: "string", default: "8" },
    "ngram-min": { type: "string", default: "2" },
    "ngram-max": { type: "string", default: "4" },
  },
});
if (!values.model || !values["prompt-tokens"]) {
  console.error("usage: node speculative-bench.mjs -m FILE --prompt-tokens 1,2,3 [-n 128] [-t 2] [--mode plain|lookup]");
  process.exit(1);
}
const prompt = values["prompt-tokens"].split(",").map(Number);
const generate = Number(values.gen);
const threads = Number(values.threads);
const draftMax = Number(values["draft-max"]);
const ngramMin = Number(values["ngram-min"]);
const ngramMax = Number(values["ngram-max"]);

/** memra's lookupDraft (packages/core/src/generation/speculative.ts), the same rule in the benchmark's language. */
function lookupDraft(history, most) {
  const length = history.length;
  for (let size = Math.min(ngramMax, length - 1); size >= ngramMin; size--) {
    const tail = length - size;
    for (let start = tail - 1; start >= 0; start--) {
      let j = 0;
      while (j < size && history[start + j] === history[tail + j]) j++;
      if (j < size) continue;
      const draft = [];
      for (let i = 0; i < most; i++) {
        const at = start + size + i;
        draft.push(at < length ? history[at] : draft[at - length]);
      }
      return draft;
    }
  }
  return [];
}

const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, maxThreads: threads, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: values.model, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: prompt.length + generate + draftMax + 16,
  batchSize: Math.max(prompt.length, draftMax + 1),
  sequences: 1,
  threads: { ideal: threads, min: threads },
});

/** Evaluates tokens with a greedy pick after each of the last `picks` of them; the picks. */
async function evaluatePicks(sequence, tokens, picks) {
  const input = tokens.map((token, i) => (i >= tokens.length - picks ? [token, { generateNext: { token: true, options: { temperature: 0 } } }] : token));
  const output = await sequence.controlledEvaluate(input);
  return Array.from({ length: picks }, (_, i) => {
    const token = output[tokens.length - picks + i]?.next?.token;
    if (token == null) throw new Error("llama.cpp returned no next token");
    return token;
  });
}

async function run() {
  const sequence = context.getSequence();
  try {
    const history = [...prompt];
    const tokens = [];
    let drafted = 0;
    let accepted = 0;
    let [next] = await evaluatePicks(sequence, prompt, 1);
    const started = performance.now();
    tokens.push(next);
    history.push(next);
    while (tokens.length < generate) {
      const most = values.mode === "lookup" ? Math.min(draftMax, generate - tokens.length - 1) : 0;
      const draft = most > 0 ? lookupDraft(history, most) : [];
      const picks = await evaluatePicks(sequence, [next, ...draft], draft.length + 1);
      drafted += draft.length;
      let used = 0;
      for (const pick of picks) {
        tokens.push(pick);
        history.push(pick);
        next = pick;
        if (used >= draft.length || pick !== draft[used] || tokens.length >= generate) break;
        used++;
        accepted++;
      }
      // Drafts after the last accepted one leave the cache (the pick after them is fed next).
      const keep = history.length - 1;
      if (sequence.nextTokenIndex > keep) await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
    }
    const ms = performance.now() - started;
    return { tokens, drafted, accepted, ms };
  } finally {
    sequence.dispose();
  }
}

await run();
const result = await run();
console.log(
  JSON.stringify({
    engine: "llama.cpp",
    mode: values.mode,
    tokens: result.tokens,
    tg_tps: ((result.tokens.length - 1) / result.ms) * 1000,
    drafted: result.drafted,
    accepted: result.accepted,
  }),
);
