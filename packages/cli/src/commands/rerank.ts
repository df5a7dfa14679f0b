import { parseArgs } from "node:util";
import { loadModel } from "@memra/core";
import { backendOptionHelp, chooseBackend, parseBackendChoice } from "../backend-choice";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { jsonStringLines, metadataOverrideOptionHelp, metadataOverrideOptions, metadataOverrideParseOptions, parsePositiveInteger, requireModelPath } from "./model-arguments";

export const rerankUsage = `usage: memra rerank -m MODEL --query TEXT (--document TEXT ... | --jsonl) [--top-n N] [--template TEXT] [--json]

Scores each document's relevance to the query with a reranker (Qwen3-Reranker as llama.cpp's
converter writes it) and prints the documents best first: score, index (in the order given) and
text, one per line, or with --json one object per line ({"index", "score", "document"}). --jsonl
reads one JSON-encoded document string per line of standard input.

options:
  --query TEXT            the query
  --document TEXT         a document (repeat for several)
  --top-n N               print the best N only
  --template TEXT         the prompt with {query} and {document} (default: the GGUF's rerank template)
  -t, --threads N         threads of the native CPU backend (default: one per processor)
${backendOptionHelp}
${metadataOverrideOptionHelp}

examples:
  memra rerank -m Qwen3-Reranker-0.6B-Q8_0.gguf --query "capital of France" --document "Paris is in France." --document "Berlin"`;

export async function rerankCommand(args: string[], io: CliIO): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: "string", short: "m" },
      query: { type: "string", short: "q" },
      document: { type: "string", multiple: true },
      jsonl: { type: "boolean", default: false },
      "top-n": { type: "string" },
      template: { type: "string" },
      json: { type: "boolean", default: false },
      threads: { type: "string", short: "t" },
      device: { type: "string" },
      ...metadataOverrideParseOptions,
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    io.stdout(`${rerankUsage}\n`);
    return;
  }
  const path = requireModelPath(values.model, rerankUsage);
  if (values.query === undefined) throw new CliError(`give --query\n${rerankUsage}`);
  if ((values.document === undefined) === !values.jsonl) throw new CliError(`give --document (one or more) or --jsonl\n${rerankUsage}`);
  const topN = values["top-n"] === undefined ? undefined : parsePositiveInteger(values["top-n"], "--top-n", 1);
  const threads = values.threads === undefined ? undefined : parsePositiveInteger(values.threads, "--threads", 1);
  const documents = values.document ?? [];
  if (values.jsonl) for await (const text of jsonStringLines(io)) documents.push(text);
  const overrides = metadataOverrideOptions(values);
  const model = loadModel(path, { backend: await chooseBackend(threads, parseBackendChoice(values.device)), ...overrides });
  try {
    const ranked = model.rank(values.query, documents, { ...(topN === undefined ? {} : { topN }), ...(values.template === undefined ? {} : { template: values.template }) });
    for (const { index, score } of ranked) {
      io.stdout(values.json ? `${JSON.stringify({ index, score, document: documents[index] })}\n` : `${score.toFixed(6)}\t${index}\t${JSON.stringify(documents[index])}\n`);
    }
  } finally {
    model.dispose();
  }
}
