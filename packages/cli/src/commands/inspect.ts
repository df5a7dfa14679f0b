import { parseArgs } from "node:util";
import { type GGUFFile, type GGUFValue, ggmlTypeName, jsonValue, openGGUF, splitInfo } from "@memra/gguf";
import { CliError } from "../cli-error";
import type { CliIO } from "../cli-io";
import { formatBytes, formatCount, padEnd, padStart } from "../format";

export const inspectUsage = `usage: memra inspect MODEL.gguf [--json]

Prints a GGUF file's metadata (long arrays by length and first items) and its tensor table
(name, type, shape, bytes) with totals. --json prints one object with arrays in full.

examples:
  memra inspect Qwen3-0.6B-Q8_0.gguf
  memra inspect Qwen3-0.6B-Q8_0.gguf --json | jq '.metadata["qwen3.block_count"]'`;

const ARRAY_PREVIEW_ITEMS = 8;
const STRING_PREVIEW_CHARS = 120;

export async function inspectCommand(args: string[], io: CliIO): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { json: { type: "boolean", default: false }, help: { type: "boolean", short: "h", default: false } },
  });
  if (values.help) {
    io.stdout(`${inspectUsage}\n`);
    return;
  }
  if (positionals.length !== 1) throw new CliError(`inspect takes one model file, got ${positionals.length}\n${inspectUsage}`);
  const file = openGGUF(positionals[0]!);
  if (values.json) {
    io.stdout(`${JSON.stringify(file.toJSON())}\n`);
    return;
  }
  io.stdout(renderInspection(file));
}

export function renderInspection(file: GGUFFile): string {
  const lines: string[] = [];
  lines.push(
    `GGUF v${file.version}, alignment ${file.alignment}, ${file.metadata.size} metadata keys, ${file.tensors.length} tensors, ${formatBytes(file.fileBytes)}` +
      (file.path ? ` (${file.path})` : ""),
  );
  const split = splitInfo(file);
  if (split) lines.push(`shard ${split.index + 1} of ${split.count} of a split model (${split.tensors ?? "?"} tensors in all); this shard's metadata and tensors follow`);
  lines.push("", "metadata:");
  const keyWidth = Math.max(...[...file.metadata.keys()].map((k) => k.length), 3);
  for (const [key, value] of file.metadata) lines.push(`  ${padEnd(key, keyWidth)}  ${describeValue(value)}`);

  lines.push("", "tensors:");
  const rows = file.tensors.map((t) => [t.name, ggmlTypeName(t.type), `[${t.shape.join(", ")}]`, formatBytes(t.byteSize)] as const);
  const widths = [4, 4, 5].map((min, column) => Math.max(min, ...rows.map((row) => row[column]!.length)));
  lines.push(`  ${padEnd("name", widths[0]!)}  ${padEnd("type", widths[1]!)}  ${padEnd("shape", widths[2]!)}  ${padStart("bytes", 10)}`);
  for (const row of rows) {
    lines.push(`  ${padEnd(row[0], widths[0]!)}  ${padEnd(row[1], widths[1]!)}  ${padEnd(row[2], widths[2]!)}  ${padStart(row[3], 10)}`);
  }

  const byType = new Map<string, { count: number; bytes: number; elements: number }>();
  let elements = 0;
  for (const t of file.tensors) {
    const name = ggmlTypeName(t.type);
    const entry = byType.get(name) ?? { count: 0, bytes: 0, elements: 0 };
    entry.count++;
    entry.bytes += t.byteSize;
    entry.elements += t.elementCount;
    byType.set(name, entry);
    elements += t.elementCount;
  }
  lines.push("", "totals:");
  for (const [name, entry] of [...byType].sort((a, b) => b[1].bytes - a[1].bytes)) {
    lines.push(`  ${padEnd(name, 8)} ${padStart(String(entry.count), 5)} tensors  ${padStart(formatCount(entry.elements), 9)} elements  ${padStart(formatBytes(entry.bytes), 11)}`);
  }
  lines.push(`  ${padEnd("all", 8)} ${padStart(String(file.tensors.length), 5)} tensors  ${padStart(formatCount(elements), 9)} elements  ${padStart(formatBytes(file.tensorBytes), 11)}`);
  return `${lines.join("\n")}\n`;
}

function describeValue(value: GGUFValue): string {
  if (value.type === "array") {
    const items = value.items;
    const preview = Array.from({ length: Math.min(items.length, ARRAY_PREVIEW_ITEMS) }, (_, i) => {
      const item = (items as ArrayLike<unknown>)[i];
      if (value.itemType === "array") return `[${(item as { items: ArrayLike<unknown> }).items.length} items]`;
      return JSON.stringify(typeof item === "bigint" ? item.toString() : item);
    });
    const more = items.length > ARRAY_PREVIEW_ITEMS ? ", ..." : "";
    return `[${value.itemType} × ${items.length}] [${preview.join(", ")}${more}]`;
  }
  const rendered = JSON.stringify(jsonValue(value));
  const shown = rendered.length > STRING_PREVIEW_CHARS ? `${rendered.slice(0, STRING_PREVIEW_CHARS)}... (${rendered.length} chars)` : rendered;
  return `${value.type.padEnd(7)} ${shown}`;
}
