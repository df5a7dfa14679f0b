#!/usr/bin/env bun
/**
 * Builds Memra's native libraries with the system C compiler.
 *
 *   bun native/build.ts cpu            native/cpu/*.c → native/build/libmemra_cpu.so (.dylib on macOS)
 *   bun native/build.ts cpu --clean    the same from scratch
 *   bun native/build.ts cpu --verbose  prints every compiler command
 *   bun native/build.ts cuda           native/cuda/*.cu (nvcc) + *.c (cc) → native/build/libmemra_cuda.so
 *   bun native/build.ts cuda-emulated  the same .cu sources compiled as C++ with the CPU emulator of
 *                                      native/cuda/emulator → native/build/libmemra_cuda_emulated.so
 *                                      (MEMRA_EMULATED_CXXFLAGS: more compile and link flags, e.g.
 *                                      "-fsanitize=undefined -fno-sanitize=vptr" to run the op tests
 *                                      under UBSan: misaligned vector loads, shifts, overflows)
 *   bun native/build.ts cuda-emulated-asan  the same under AddressSanitizer
 *                                      → native/build/libmemra_cuda_emulated_asan.so (accesses past
 *                                      a tensor's end: native/cuda/tests/asan-op-tests.sh)
 *   bun native/build.ts all            cpu and cuda
 *
 * Incremental: each source compiles to native/build/obj/cpu/<name>.o and is recompiled only when
 * it, a header it includes (from the compiler's -MMD dependency file) or the flags changed; the
 * library is relinked only when an object or the set of sources changed. Sources compile in
 * parallel. Without a C compiler (CC, else `cc`) it prints a notice and exits 0: the native
 * library is optional, and Memra falls back to the reference backend.
 *
 * The cuda target compiles each .cu with nvcc (NVCC, else `nvcc` on PATH, else
 * /usr/local/cuda/bin/nvcc) for sm_80, sm_89 and sm_90 plus compute_90 PTX (MEMRA_CUDA_ARCHS=80,90:
 * those only, the newest with its PTX), and links the CUDA
 * runtime statically, so the library needs only the driver at run time. Without nvcc it prints a
 * notice and exits 0: @memra/cuda-ffi then reports CudaUnavailableError on use.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, isAbsolute, join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..");
const NATIVE = import.meta.dir;
const BUILD = join(NATIVE, "build");
const LIBRARY_SUFFIX = process.platform === "darwin" ? "dylib" : "so";

interface Target {
  readonly name: string;
  readonly library: string;
  readonly sourceDirectory: string;
  /** Sources to leave out, given the directory's file names. */
  readonly exclude: (files: readonly string[]) => readonly string[];
  /** CUDA sources (.cu), compiled with nvcc, besides the .c files; nvcc also links. */
  readonly cuda?: boolean;
  /** CUDA sources (.cu) and emulator/*.cpp compiled as C++ (CXX, else `c++`) against the CPU
   * emulator of native/cuda/emulator; the C++ compiler links. */
  readonly emulated?: boolean;
  /** More compile and link flags of an emulated target (before MEMRA_EMULATED_CXXFLAGS). */
  readonly emulatedFlags?: readonly string[];
}

const TARGETS: Record<string, Target> = {
  cpu: {
    name: "cpu",
    library: join(BUILD, `libmemra_cpu.${LIBRARY_SUFFIX}`),
    sourceDirectory: join(NATIVE, "cpu"),
    exclude: () => [],
  },
  cuda: {
    name: "cuda",
    library: join(BUILD, `libmemra_cuda.${LIBRARY_SUFFIX}`),
    sourceDirectory: join(NATIVE, "cuda"),
    exclude: () => [],
    cuda: true,
  },
  "cuda-emulated": {
    name: "cuda-emulated",
    library: join(BUILD, `libmemra_cuda_emulated.${LIBRARY_SUFFIX}`),
    sourceDirectory: join(NATIVE, "cuda"),
    exclude: () => [],
    emulated: true,
  },
  // The same under AddressSanitizer, with each allocation's size-class padding poisoned
  // (context.cu): a kernel reading or writing past its tensor's end is reported, where a GPU reads
  // the padding unnoticed. Loaded by an uninstrumented Bun, so run with libasan preloaded:
  // native/cuda/tests/asan-op-tests.sh.
  "cuda-emulated-asan": {
    name: "cuda-emulated-asan",
    library: join(BUILD, `libmemra_cuda_emulated_asan.${LIBRARY_SUFFIX}`),
    sourceDirectory: join(NATIVE, "cuda"),
    exclude: () => [],
    emulated: true,
    emulatedFlags: ["-fsanitize=address", "-fno-omit-frame-pointer"],
  },
};

/** `all` builds every target. */
const ALIASES: Record<string, readonly string[]> = { all: ["cpu", "cuda"] };

const NVCC_FLAGS = [
  "-std=c++17",
  "-O3",
  "-Xcompiler",
  "-fPIC",
  "-Xcompiler",
  "-fvisibility=hidden",
  "-Xcompiler",
  "-Wall",
  // the outputs of cudaArchitectureFlags (cubins, the PTX) compiled in parallel: matmul.cu, the
  // longest source, takes 3m46s for the four one after another on 2 cores, 2m00s in parallel (as
  // many threads as CPUs); what bounds the GPU machine's build step
  "--threads",
  "0",
];
/** The GPU architectures the cuda target compiles for: a cubin each, and the newest one's PTX as well. */
const CUDA_ARCHITECTURES = ["80", "89", "90"];

/**
 * -gencode flags for MEMRA_CUDA_ARCHS (comma-separated compute capabilities, e.g. `80,90`), else
 * CUDA_ARCHITECTURES: a cubin for each and PTX of the newest, which the driver compiles for GPUs
 * newer than any cubin. CI compiles 90 only (its 2 cores spent most of the build in nvcc), the GPU
 * script too (the H200 is sm_90).
 */
function cudaArchitectureFlags(setting: string | undefined): string[] {
  const named = (setting ?? "").split(",").map((part) => part.trim()).filter(Boolean);
  for (const arch of named) if (!/^\d{2,3}[af]?$/.test(arch)) throw new Error(`MEMRA_CUDA_ARCHS: "${arch}" is not a compute capability such as 80 or 90`);
  const archs = named.length > 0 ? named : CUDA_ARCHITECTURES;
  return archs.map((arch, i) =>
    i === archs.length - 1 ? `-gencode=arch=compute_${arch},code=[sm_${arch},compute_${arch}]` : `-gencode=arch=compute_${arch},code=sm_${arch}`,
  );
}
const NVCC_LINK_FLAGS = ["-shared", "-cudart", "static"];
/** The emulated cuda target: .cu as C++17 against emulator/include (cuda_runtime.h etc.); no FMA
 * contraction (the kernels' __fmul_rn/__fadd_rn) and no strict aliasing (the kernels type-pun as
 * CUDA code does). */
const EMULATED_CXX_FLAGS = [
  "-x",
  "c++",
  "-std=c++17",
  "-O2",
  "-fPIC",
  "-fvisibility=hidden",
  "-ffp-contract=off",
  "-fno-strict-aliasing",
  "-Wall",
  "-Wextra",
  "-Wno-unknown-pragmas",
  "-DMEMRA_CUDA_EMULATED=1",
];
/**
 * emulator.cpp (fibers, warp collectives, the mma products: half of an emulated golden model's
 * time) at -O3 for the CPU it is built on: 4 s to compile, where -O3 for matmul.cu would add 25 s
 * to the build's longest compile. Results do not change: -ffp-contract=off keeps every product
 * and sum apart, and the sums' order is the code's.
 */
const EMULATOR_RUNTIME_FLAGS = ["-O3", "-march=native"];
const EMULATED_LINK_FLAGS = ["-shared", "-pthread"];
/** C sources of the cuda target (launch-plan.c): plain C11, no CUDA. */
const CUDA_C_FLAGS = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"];

/** nvcc from NVCC, PATH or /usr/local/cuda; undefined when absent. */
function findNvcc(): string | undefined {
  const named = process.env.NVCC?.trim();
  if (named) return Bun.which(named) ?? (existsSync(named) ? named : undefined);
  return Bun.which("nvcc") ?? (existsSync("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : undefined);
}

const COMPILE_FLAGS = ["-std=c11", "-O3", "-fPIC", "-fvisibility=hidden", "-pthread", "-Wall", "-Wextra", "-Wno-unused-parameter"];
const LINK_FLAGS = ["-shared", "-pthread", "-lm"];

function notice(message: string): void {
  console.log(`memra native build: ${message}`);
}

function modifiedAt(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return Number.POSITIVE_INFINITY; // missing counts as newer than anything
  }
}

/** The files a -MMD dependency file lists (the object's prerequisites). */
function dependenciesOf(dependencyFile: string): string[] {
  if (!existsSync(dependencyFile)) return [];
  const text = readFileSync(dependencyFile, "utf8").replace(/\\\n/g, " ");
  const colon = text.indexOf(": ");
  if (colon < 0) return [];
  return text
    .slice(colon + 2)
    .split(/\s+/)
    .filter((path) => path.length > 0 && !path.endsWith(":"));
}

/** A source's bytes plus those of the project headers it includes (recursively, each once): how
 * long it takes to compile, roughly. */
function compileWeight(source: string, seen = new Set<string>()): number {
  if (seen.has(source) || !existsSync(source)) return 0;
  seen.add(source);
  const text = readFileSync(source, "utf8");
  let weight = text.length;
  for (const match of text.matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)) {
    for (const directory of [join(source, ".."), join(NATIVE, "include")]) {
      const header = join(directory, match[1]!);
      if (existsSync(header)) {
        weight += compileWeight(header, seen);
        break;
      }
    }
  }
  return weight;
}

async function run(command: string[], verbose: boolean): Promise<{ ok: boolean; output: string }> {
  if (verbose) console.log(command.join(" "));
  const process_ = Bun.spawn(command, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(process_.stdout).text(), new Response(process_.stderr).text(), process_.exited]);
  return { ok: code === 0, output: stdout + stderr };
}

/** Runs `tasks` with at most `limit` at a time. */
async function inParallel<T>(tasks: readonly (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await tasks[index]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

async function build(target: Target, compiler: string, options: { clean: boolean; verbose: boolean; nvcc?: string }): Promise<boolean> {
  const objectDirectory = join(BUILD, "obj", target.name);
  if (options.clean) rmSync(objectDirectory, { recursive: true, force: true });
  mkdirSync(objectDirectory, { recursive: true });

  const files = [
    ...readdirSync(target.sourceDirectory).filter((file) => file.endsWith(".c") || ((target.cuda === true || target.emulated === true) && file.endsWith(".cu"))),
    ...(target.emulated === true ? readdirSync(join(target.sourceDirectory, "emulator")).filter((file) => file.endsWith(".cpp")).map((file) => join("emulator", file)) : []),
  ];
  const excluded = new Set(target.exclude(files));
  const sources = files.filter((file) => !excluded.has(file)).sort();
  const extraFlags = (process.env.MEMRA_NATIVE_CFLAGS ?? "").split(/\s+/).filter(Boolean);
  const includes = [`-I${relative(ROOT, join(NATIVE, "include"))}`, `-I${relative(ROOT, target.sourceDirectory)}`];
  const flags = target.cuda || target.emulated ? [...CUDA_C_FLAGS, ...includes] : [...COMPILE_FLAGS, ...extraFlags, ...includes];
  const cxx = process.env.CXX?.trim() || "c++";
  const emulatedExtra = [...(target.emulatedFlags ?? []), ...(process.env.MEMRA_EMULATED_CXXFLAGS ?? "").split(/\s+/).filter(Boolean)];
  const emulatedFlags = [...EMULATED_CXX_FLAGS, ...emulatedExtra, `-I${relative(ROOT, join(target.sourceDirectory, "emulator", "include"))}`, ...includes];
  const nvccFlags = [...NVCC_FLAGS, ...cudaArchitectureFlags(process.env.MEMRA_CUDA_ARCHS), ...(process.env.MEMRA_NVCC_FLAGS ?? "").split(/\s+/).filter(Boolean), ...includes];
  const linkFlags = target.cuda ? NVCC_LINK_FLAGS : target.emulated ? [...EMULATED_LINK_FLAGS, ...emulatedExtra] : LINK_FLAGS;

  // A change of compiler, flags or source set invalidates everything the stamp covers.
  const stampFile = join(objectDirectory, "build-stamp.json");
  const stamp = JSON.stringify({ compiler, flags, linkFlags, sources, ...(target.cuda ? { nvcc: options.nvcc, nvccFlags } : {}), ...(target.emulated ? { cxx, emulatedFlags, emulatorRuntimeFlags: EMULATOR_RUNTIME_FLAGS } : {}) });
  const previousStamp = existsSync(stampFile) ? readFileSync(stampFile, "utf8") : "";
  const flagsChanged =
    previousStamp === "" ||
    JSON.parse(previousStamp).flags?.join(" ") !== flags.join(" ") ||
    JSON.parse(previousStamp).compiler !== compiler ||
    (target.emulated === true && (JSON.parse(previousStamp).emulatedFlags?.join(" ") !== emulatedFlags.join(" ") ||
        JSON.parse(previousStamp).emulatorRuntimeFlags?.join(" ") !== EMULATOR_RUNTIME_FLAGS.join(" ") ||
        JSON.parse(previousStamp).cxx !== cxx)) ||
    (target.cuda === true && (JSON.parse(previousStamp).nvccFlags?.join(" ") !== nvccFlags.join(" ") || JSON.parse(previousStamp).nvcc !== options.nvcc));

  const started = performance.now();
  const jobs = sources.map((source) => {
    const sourcePath = join(target.sourceDirectory, source);
    const objectPath = join(objectDirectory, basename(source).replace(/\.(cu|c|cpp)$/, ".o"));
    const dependencyPath = objectPath.replace(/\.o$/, ".d");
    const objectTime = modifiedAt(objectPath);
    const stale =
      flagsChanged ||
      objectTime === Number.POSITIVE_INFINITY ||
      modifiedAt(sourcePath) > objectTime ||
      // nvcc lists the CUDA headers by absolute path (cc's -MMD lists only relative project headers).
      dependenciesOf(dependencyPath).some((dependency) => modifiedAt(isAbsolute(dependency) ? dependency : join(ROOT, dependency)) > objectTime);
    return { sourcePath, objectPath, dependencyPath, stale };
  });

  // Longest first, so that no long compile starts last while the other cores idle: matmul.cu is
  // about half of the cuda target's nvcc time (250 of 480 CPU seconds). On 2 cores the clean cuda
  // build went from 265 s to 260 s: 240 s is the floor, the sources in name order were already close.
  const weights = new Map(jobs.map((job) => [job, compileWeight(job.sourcePath)]));
  const stale = jobs.filter((job) => job.stale).sort((a, b) => weights.get(b)! - weights.get(a)!);
  const results = await inParallel(
    stale.map((job) => () =>
      run(
        target.emulated === true && !job.sourcePath.endsWith(".c")
          ? [cxx, ...emulatedFlags, ...(job.sourcePath.endsWith("emulator.cpp") ? EMULATOR_RUNTIME_FLAGS : []), "-MMD", "-MF", relative(ROOT, job.dependencyPath), "-c", relative(ROOT, job.sourcePath), "-o", relative(ROOT, job.objectPath)]
          : job.sourcePath.endsWith(".cu")
          ? [options.nvcc!, ...nvccFlags, "-MMD", "-MF", relative(ROOT, job.dependencyPath), "-c", relative(ROOT, job.sourcePath), "-o", relative(ROOT, job.objectPath)]
          : [compiler, ...flags, "-MMD", "-MF", relative(ROOT, job.dependencyPath), "-c", relative(ROOT, job.sourcePath), "-o", relative(ROOT, job.objectPath)],
        options.verbose,
      ).then((result) => ({ ...result, job })),
    ),
    availableParallelism(),
  );
  let failed = false;
  for (const result of results) {
    if (result.output.trim()) process.stderr.write(result.output);
    if (!result.ok) {
      failed = true;
      console.error(`memra native build: compiling ${relative(ROOT, result.job.sourcePath)} failed`);
    }
  }
  if (failed) return false;

  const objects = jobs.map((job) => job.objectPath);
  const libraryTime = modifiedAt(target.library);
  const relink = stale.length > 0 || previousStamp !== stamp || libraryTime === Number.POSITIVE_INFINITY || objects.some((object) => modifiedAt(object) > libraryTime);
  if (relink) {
    const linker = target.cuda ? options.nvcc! : target.emulated ? cxx : compiler;
    const linked = await run([linker, ...objects.map((object) => relative(ROOT, object)), ...linkFlags, "-o", relative(ROOT, target.library)], options.verbose);
    if (linked.output.trim()) process.stderr.write(linked.output);
    if (!linked.ok) {
      console.error(`memra native build: linking ${relative(ROOT, target.library)} failed`);
      return false;
    }
  }
  writeFileSync(stampFile, stamp);
  const milliseconds = Math.round(performance.now() - started);
  if (stale.length === 0 && !relink) {
    notice(`${relative(ROOT, target.library)} is up to date (${sources.length} sources)`);
  } else {
    notice(`compiled ${stale.length} of ${sources.length} sources, ${relink ? "linked" : "kept"} ${relative(ROOT, target.library)} in ${milliseconds} ms`);
  }
  return true;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const names = args.filter((arg) => !arg.startsWith("-")).flatMap((name) => ALIASES[name] ?? [name]);
  const clean = args.includes("--clean");
  const verbose = args.includes("--verbose");
  const unknown = names.filter((name) => !(name in TARGETS));
  if (names.length === 0 || unknown.length > 0) {
    console.error(`usage: bun native/build.ts <${[...Object.keys(TARGETS), ...Object.keys(ALIASES)].join("|")}> [--clean] [--verbose]${unknown.length ? ` (unknown: ${unknown.join(", ")})` : ""}`);
    return 2;
  }
  if (process.platform === "win32") {
    notice("native libraries are not built on Windows yet; Memra will use the reference backend");
    return 0;
  }
  const compilerName = process.env.CC?.trim() || "cc";
  const compiler = Bun.which(compilerName);
  if (!compiler) {
    notice(`no C compiler found (${process.env.CC ? `CC=${compilerName}` : "`cc` is not on PATH"}); skipping ${names.map((n) => basename(TARGETS[n]!.library)).join(", ")}.`);
    notice("The native backend will be unavailable and Memra falls back to the reference (TypeScript) backend. Install a C compiler (e.g. gcc or clang) to build it.");
    return 0;
  }
  for (const name of names) {
    const target = TARGETS[name]!;
    let nvcc: string | undefined;
    if (target.cuda) {
      nvcc = findNvcc();
      if (!nvcc) {
        notice(`nvcc not found (${process.env.NVCC ? `NVCC=${process.env.NVCC}` : "not on PATH nor in /usr/local/cuda/bin"}); skipping ${basename(target.library)}.`);
        notice("@memra/cuda-ffi will report CudaUnavailableError when used. Install the CUDA toolkit (nvcc) to build it.");
        continue;
      }
    }
    if (!(await build(target, compilerName, { clean, verbose, nvcc }))) return 1;
  }
  return 0;
}

process.exit(await main());
