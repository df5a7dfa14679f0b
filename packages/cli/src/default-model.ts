import { CliError } from "./cli-error";
import type { CliIO } from "./cli-io";

/**
 * The model `generate` and `chat` use without -m: until a trained demo model ships, a small
 * deterministic synthetic Qwen3 (2 layers, hidden 64, real Qwen3 vocabulary, random weights),
 * generated on first use into the cache folder. It writes nonsense; it shows the pipeline runs.
 */
export async function defaultModelPath(io: CliIO, quiet: boolean): Promise<string> {
  let synthetic: typeof import("@memra/synthetic");
  try {
    synthetic = await import("@memra/synthetic");
  } catch {
    throw new CliError("no model given and no built-in demo model in this installation: pass -m path/to/model.gguf");
  }
  const path = await synthetic.syntheticModelFile(synthetic.resolveOptions("tiny", { weightType: "q8_0" }));
  if (!quiet) {
    io.stderr(
      `memra: no -m given, so using the built-in demo model: a tiny synthetic Qwen3 (2 layers, hidden 64, random weights, real Qwen3 vocabulary) cached at ${path}. ` +
        "Its output is nonsense; pass -m path/to/model.gguf to run a real model.\n",
    );
  }
  return path;
}
