// llama.cpp's reranking time through node-llama-cpp (CPU, prebuilt binary): the ranking context's
// evaluation of each tokenized prompt of a JSON file (an array of token arrays), one after another
// as LlamaRankingContext.rankAll does, REPS times after one untimed pass. Prints one JSON line:
// {"ms": [per pass], "scores": [first pass]}. Used by rerank-side-by-side.ts.
//
//   node tools/llamacpp/rerank-bench.mjs -m FILE --prompts PROMPTS.json [-t 2] [-r 3]
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const { values } = parseArgs({
  options: {
    model: { type: "string", short: "m" },
    prompts: { type: "string" },
    threads: { type: "string", short: "t", default: "2" },
    reps: { type: "string", short: "r", default: "3" },
  },
});
if (!values.model || !values.prompts) {
  console.error("usage: node rerank-bench.mjs -m FILE --prompts PROMPTS.json [-t 2] [-r 3]");
  process.exit(1);
}
const prompts = JSON.parse(readFileSync(values.prompts, "utf8"));
const longest = Math.max(...prompts.map((tokens) => tokens.length));
const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: values.model });
const context = await model.createRankingContext({ contextSize: Math.max(512, longest + 1), batchSize: Math.max(512, longest + 1), threads: Number(values.threads) });
const pass = async () => {
  const scores = [];
  for (const tokens of prompts) scores.push(await context._evaluateRankingForInput(tokens));
  return scores;
};
const scores = await pass();
const ms = [];
for (let i = 0; i < Number(values.reps); i++) {
  const start = performance.now();
  await pass();
  ms.push(performance.now() - start);
}
console.log(JSON.stringify({ ms, scores }));
await context.dispose();
await model.dispose();
