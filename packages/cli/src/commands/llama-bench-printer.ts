/**
 * llama-bench's output formats (tools/llama-bench/llama-bench.cpp's printers): the markdown table,
 * CSV, a JSON array and JSON lines, with llama-bench's field names, value formats and layout, limited
 * to the fields memra has a value for. `memra bench -o FORMAT` and `-oe FORMAT` print through these.
 */

/** One test's result under llama-bench's field names (the test struct of llama-bench.cpp). */
export interface BenchRecord {
  readonly cpu_info: string;
  readonly gpu_info: string;
  readonly backends: string;
  readonly model_filename: string;
  readonly model_type: string;
  readonly model_size: number;
  readonly model_n_params: number;
  readonly n_batch: number;
  readonly n_ubatch: number;
  readonly n_threads: number;
  readonly type_k: string;
  readonly type_v: string;
  readonly n_gpu_layers: number;
  readonly n_cpu_moe: number;
  readonly n_prompt: number;
  readonly n_gen: number;
  readonly n_depth: number;
  /** RFC 3339, seconds: "2025-01-31T12:00:00Z". */
  readonly test_time: string;
  /** Nanoseconds of each timed repetition. */
  readonly samples_ns: readonly number[];
  /** memra's --npl: sequences decoded together (0 for llama-bench's own tests); present only with --npl. */
  readonly n_parallel?: number;
}

export type BenchOutputFormat = "none" | "md" | "csv" | "json" | "jsonl";
export const BENCH_OUTPUT_FORMATS: readonly BenchOutputFormat[] = ["none", "md", "csv", "json", "jsonl"];

type FieldKind = "string" | "int" | "float";

/** llama-bench's fields that memra fills, in llama-bench's order, with the kind that decides their JSON form. */
const FIELDS: readonly (readonly [string, FieldKind])[] = [
  ["cpu_info", "string"],
  ["gpu_info", "string"],
  ["backends", "string"],
  ["model_filename", "string"],
  ["model_type", "string"],
  ["model_size", "int"],
  ["model_n_params", "int"],
  ["n_batch", "int"],
  ["n_ubatch", "int"],
  ["n_threads", "int"],
  ["type_k", "string"],
  ["type_v", "string"],
  ["n_gpu_layers", "int"],
  ["n_cpu_moe", "int"],
  ["n_prompt", "int"],
  ["n_gen", "int"],
  ["n_depth", "int"],
  ["test_time", "string"],
  ["avg_ns", "int"],
  ["stddev_ns", "int"],
  ["avg_ts", "float"],
  ["stddev_ts", "float"],
];

/** llama-bench's avg: the mean (integer division for nanoseconds). */
function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** llama-bench's stdev: the sample standard deviation, as its one-pass formula computes it. */
function standardDeviation(values: readonly number[]): number {
  if (values.length <= 1) return 0;
  const average = mean(values);
  const squares = values.reduce((sum, value) => sum + value * value, 0);
  return Math.sqrt(Math.max(0, squares / (values.length - 1) - (average * average * values.length) / (values.length - 1)));
}

/** Tokens per second of each repetition: (n_prompt + n_gen) / its time (llama-bench's get_ts). */
export function samplesTokensPerSecond(record: BenchRecord): number[] {
  const tokens = (record.n_parallel || 1) * (record.n_prompt + record.n_gen);
  return record.samples_ns.map((ns) => (1e9 * tokens) / ns);
}

/** The test's name in the markdown table: pp512, tg128, pp512+tg128, with " @ d4096" at a depth (memra's --npl: "tg128 x4"). */
export function benchTestName(record: Pick<BenchRecord, "n_prompt" | "n_gen" | "n_depth" | "n_parallel">): string {
  let name = record.n_gen === 0 ? `pp${record.n_prompt}` : record.n_prompt === 0 ? `tg${record.n_gen}` : `pp${record.n_prompt}+tg${record.n_gen}`;
  if (record.n_parallel) name += ` x${record.n_parallel}`;
  if (record.n_depth > 0) name += ` @ d${record.n_depth}`;
  return name;
}

/** printf's "%.Nf": as toFixed, but an exact tie rounds to even as C's printf does. */
export function printfFixed(value: number, digits: number): string {
  const rounded = value.toFixed(digits);
  if (!Number.isFinite(value)) return rounded;
  const exact = Math.abs(value).toFixed(100);
  const point = exact.indexOf(".");
  if (/^50*$/.test(exact.slice(point + 1 + digits))) {
    const truncated = exact.slice(0, point + 1 + digits).replace(/\.$/, "");
    if (Number(truncated.at(-1)) % 2 === 0) return `${value < 0 ? "-" : ""}${truncated}`;
  }
  return rounded;
}

/** Every field's value as llama-bench's get_values writes it (std::to_string), by name. */
function fieldValues(record: BenchRecord): Map<string, string> {
  const perSecond = samplesTokensPerSecond(record);
  const values = new Map<string, string>();
  for (const [name] of FIELDS) {
    if (name === "avg_ns") values.set(name, String(Math.floor(mean(record.samples_ns))));
    else if (name === "stddev_ns") values.set(name, String(Math.floor(standardDeviation(record.samples_ns))));
    else if (name === "avg_ts") values.set(name, printfFixed(mean(perSecond), 6));
    else if (name === "stddev_ts") values.set(name, printfFixed(standardDeviation(perSecond), 6));
    else values.set(name, String(record[name as keyof BenchRecord]));
  }
  if (record.n_parallel !== undefined) values.set("n_parallel", String(record.n_parallel));
  return values;
}

function fieldsOf(record: BenchRecord): (readonly [string, FieldKind])[] {
  return record.n_parallel === undefined ? [...FIELDS] : [...FIELDS, ["n_parallel", "int"]];
}

/** The CSV/JSON field names `memra bench` writes (with --npl, memra's n_parallel after them). */
export function benchFieldNames(withParallel = false): string[] {
  return [...FIELDS.map(([name]) => name), ...(withParallel ? ["n_parallel"] : [])];
}

function escapeJson(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

function jsonValue(kind: FieldKind, value: string): string {
  return kind === "string" ? `"${escapeJson(value)}"` : value;
}

/** ostream's default form of a double (6 significant digits), as llama-bench writes samples_ts. */
function shortNumber(value: number): string {
  return String(Number(value.toPrecision(6)));
}

/** The markdown table's optional columns, in llama-bench's order, shown when their parameter is not the default. */
export type MarkdownColumn = "n_gpu_layers" | "n_cpu_moe" | "n_threads" | "n_batch" | "n_ubatch" | "type_k" | "type_v";
const MARKDOWN_COLUMN_ORDER: readonly MarkdownColumn[] = ["n_gpu_layers", "n_cpu_moe", "n_threads", "n_batch", "n_ubatch", "type_k", "type_v"];

/** markdown_printer's get_field_width: negative is left-aligned. */
const WIDTHS: Readonly<Record<string, number>> = {
  model: -30,
  size: 10,
  params: 10,
  backend: -10,
  n_gpu_layers: 3,
  n_cpu_moe: 10,
  n_threads: 7,
  n_batch: 7,
  n_ubatch: 8,
  type_k: 6,
  type_v: 6,
  test: 15,
  "t/s": 20,
};

/** markdown_printer's get_field_display_name. */
const DISPLAY_NAMES: Readonly<Record<string, string>> = { n_gpu_layers: "ngl", n_threads: "threads" };

function cell(value: string, width: number): string {
  return width < 0 ? value.padEnd(-width) : value.padStart(width);
}

/** llama-bench's size column: MiB below 1 GiB, else GiB, two decimals. */
export function formatModelSize(bytes: number): string {
  return bytes < 1024 * 1024 * 1024 ? `${printfFixed(bytes / 1024 / 1024, 2)} MiB` : `${printfFixed(bytes / 1024 / 1024 / 1024, 2)} GiB`;
}

/** llama-bench's params column: M below a billion, else B, two decimals. */
export function formatParameterCount(parameters: number): string {
  return parameters < 1e9 ? `${printfFixed(parameters / 1e6, 2)} M` : `${printfFixed(parameters / 1e9, 2)} B`;
}

export interface BenchPrinter {
  header(): string;
  test(record: BenchRecord): string;
  footer(): string;
}

export interface MarkdownOptions {
  /** The optional columns to show (llama-bench shows one when its parameter was given a value other than the default). */
  readonly columns: ReadonlySet<MarkdownColumn>;
  /** The line after the table (llama-bench: "build: COMMIT (NUMBER)"). */
  readonly footer: () => string;
}

function markdownPrinter(options: MarkdownOptions): BenchPrinter {
  const fields = ["model", "size", "params", "backend", ...MARKDOWN_COLUMN_ORDER.filter((column) => options.columns.has(column)), "test", "t/s"];
  return {
    header() {
      const names = `|${fields.map((field) => ` ${cell(DISPLAY_NAMES[field] ?? field, WIDTHS[field]!)} |`).join("")}\n`;
      const rule = `|${fields.map((field) => ` ${"-".repeat(Math.abs(WIDTHS[field]!) - 1)}${WIDTHS[field]! > 0 ? ":" : "-"} |`).join("")}\n`;
      return names + rule;
    },
    test(record) {
      const perSecond = samplesTokensPerSecond(record);
      const values: Record<string, string> = {
        model: record.model_type,
        size: formatModelSize(record.model_size),
        params: formatParameterCount(record.model_n_params),
        backend: record.backends,
        test: benchTestName(record),
        "t/s": `${printfFixed(mean(perSecond), 2)} ± ${printfFixed(standardDeviation(perSecond), 2)}`,
      };
      for (const column of MARKDOWN_COLUMN_ORDER) values[column] = String(record[column]);
      return `|${fields.map((field) => ` ${cell(values[field]!, WIDTHS[field]!)} |`).join("")}\n`;
    },
    footer: () => `\n${options.footer()}\n`,
  };
}

function csvPrinter(withParallel: boolean): BenchPrinter {
  const quote = (value: string) => `"${value.replaceAll('"', '""')}"`;
  return {
    header: () => `${benchFieldNames(withParallel).join(",")}\n`,
    test: (record) => `${[...fieldValues(record).values()].map(quote).join(",")}\n`,
    footer: () => "",
  };
}

/** The JSON members of a record, each but the last followed by `separator` (llama-bench's JSON lines put none after samples_ns's space). */
function jsonFields(record: BenchRecord, separator: string, samplesSeparator = separator): string[] {
  const values = fieldValues(record);
  return [
    ...fieldsOf(record).map(([name, kind]) => `"${name}": ${jsonValue(kind, values.get(name)!)}${separator}`),
    `"samples_ns": [ ${record.samples_ns.join(", ")} ]${samplesSeparator}`,
    `"samples_ts": [ ${samplesTokensPerSecond(record).map(shortNumber).join(", ")} ]`,
  ];
}

function jsonPrinter(): BenchPrinter {
  let first = true;
  return {
    header: () => "[\n",
    test(record) {
      const lead = first ? "" : ",\n";
      first = false;
      return `${lead}  {\n${jsonFields(record, ",").map((line) => `    ${line}\n`).join("")}  }`;
    },
    footer: () => "\n]\n",
  };
}

function jsonLinesPrinter(): BenchPrinter {
  return {
    header: () => "",
    test: (record) => `{${jsonFields(record, ", ", ",").join("")}}\n`,
    footer: () => "",
  };
}

/** The printer of a format (undefined for "none"). `withParallel`: the records carry memra's n_parallel (CSV header). */
export function llamaBenchPrinter(format: BenchOutputFormat, markdown: MarkdownOptions, withParallel = false): BenchPrinter | undefined {
  switch (format) {
    case "none":
      return undefined;
    case "md":
      return markdownPrinter(markdown);
    case "csv":
      return csvPrinter(withParallel);
    case "json":
      return jsonPrinter();
    case "jsonl":
      return jsonLinesPrinter();
  }
}
