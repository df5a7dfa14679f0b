// The Memra side of tools/llamacpp/tokenizer-bench.mjs: loads the Qwen3 vocabulary, reads a text
// file, then answers every "run" line on stdin with one JSON line {"ms", "tokens", "checksum"}
// (one encode of the whole text with an empty word cache).
import { qwen3Vocabulary } from "../src/__fixtures__/qwen3-vocabulary";
import { Tokenizer } from "../src/tokenizer";

const path = process.argv[2];
if (!path) throw new Error("usage: bun tokenize-worker.ts TEXT_FILE");
const text = await Bun.file(path).text();
const tokenizer = Tokenizer.fromVocabulary(qwen3Vocabulary());
tokenizer.encode(text); // warm up the JIT
console.log(JSON.stringify({ ready: true }));

const decoder = new TextDecoder();
let buffered = "";
for await (const chunk of Bun.stdin.stream()) {
  buffered += decoder.decode(chunk, { stream: true });
  let newline = buffered.indexOf("\n");
  while (newline >= 0) {
    const command = buffered.slice(0, newline).trim();
    buffered = buffered.slice(newline + 1);
    newline = buffered.indexOf("\n");
    if (command === "quit") process.exit(0);
    if (command !== "run") continue;
    tokenizer.clearCache();
    const start = performance.now();
    const ids = tokenizer.encode(text);
    const ms = performance.now() - start;
    let checksum = 0;
    for (const id of ids) checksum = (Math.imul(checksum, 31) + id) | 0;
    console.log(JSON.stringify({ ms, tokens: ids.length, checksum }));
  }
}
