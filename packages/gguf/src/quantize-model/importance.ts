/**
 * What llama-quantize does with `--imatrix FILE` before it quantizes (tools/quantize/quantize.cpp's
 * prepare_imatrix and the metadata it adds): the importance entries, filtered by
 * `--include-weights` / `--exclude-weights`, and the `quantize.imatrix.*` values written into the
 * quantized file.
 */
import type { MetadataOverride } from "../metadata-override";
import { QuantizationError } from "./quantization-error";

export interface ImportanceSelection {
  /** Keep only the entries whose name contains one of these (llama-quantize --include-weights). */
  readonly include?: readonly string[];
  /** Drop the entries whose name contains one of these (llama-quantize --exclude-weights). */
  readonly exclude?: readonly string[];
}

export interface QuantizationImportance {
  /** planQuantization's `importance`: empty when the selection left nothing (then there is no importance matrix). */
  readonly importance: Map<string, Float32Array>;
  /** quantize.imatrix.file, .dataset, .entries_count and .chunks_count, for `metadataOverrides` (after the user's). */
  readonly metadata: MetadataOverride[];
}

const utf8 = new TextEncoder();
/** strncpy into llama_model_kv_override's char[128]: at most 127 bytes (a cut character is dropped whole). */
function clipped(text: string): string {
  const bytes = utf8.encode(text);
  if (bytes.length <= 127) return text;
  return new TextDecoder().decode(bytes.subarray(0, 127)).replace(/\uFFFD$/, "");
}

/**
 * The importance matrix llama-quantize hands to llama_model_quantize, from `importance` (importanceOf
 * of the file named `file`, as the user wrote its path) with its `datasets` and `chunkCount`.
 *
 * @throws QuantizationError when both `include` and `exclude` are given (llama-quantize refuses that too).
 */
export function quantizationImportance(
  importance: ReadonlyMap<string, Float32Array>,
  source: { readonly file: string; readonly datasets: readonly string[]; readonly chunkCount: number },
  selection: ImportanceSelection = {},
): QuantizationImportance {
  const include = selection.include ?? [];
  const exclude = selection.exclude ?? [];
  if (include.length > 0 && exclude.length > 0) throw new QuantizationError("give --include-weights or --exclude-weights, not both");
  let entries = [...importance];
  if (exclude.length > 0) entries = entries.filter(([name]) => !exclude.some((part) => name.includes(part)));
  if (include.length > 0) entries = entries.filter(([name]) => include.some((part) => name.includes(part)));
  const selected = new Map(entries);
  if (selected.size === 0) return { importance: selected, metadata: [] };
  const metadata: MetadataOverride[] = [{ key: "quantize.imatrix.file", type: "str", value: clipped(source.file) }];
  if (source.datasets.length > 0) metadata.push({ key: "quantize.imatrix.dataset", type: "str", value: clipped(source.datasets[0]!) });
  metadata.push({ key: "quantize.imatrix.entries_count", type: "int", value: BigInt(selected.size) });
  if (source.chunkCount > 0) metadata.push({ key: "quantize.imatrix.chunks_count", type: "int", value: BigInt(source.chunkCount) });
  return { importance: selected, metadata };
}
