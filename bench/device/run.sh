#!/usr/bin/env bash
# The one prepared script for a GPU session (issue 8): builds libmemra_cuda (or takes the one built
# here, bundle.sh pack --cuda), runs the native and TypeScript CUDA op tests, measures the card's
# ceilings, then the issue's tg128 / pp512 benchmarks on synthetic Qwen3-0.6B (and 64 sequences
# batched), Qwen3-8B-shaped (all 36 layers, 8 of them generated and the rest repeating their
# bytes: --distinct-layers) and the scaled Qwen3-30B-A3B shapes, the golden suite and the
# context-shift goldens on CUDA, the variants that time the newest kernels and the profiles of a
# decode step, a prefill and a batched step, single-op timings (ops.bench.ts), the PyTorch anchor,
# the other variants (what graphs, PDL, early weights, the fusions and device-side sampling save),
# and last the previous kernels' single ops.
# $OUT (default bench/device/out) gets three files, kept current after every step, since the `run`
# tool brings back at most 8 files from $OUT and, when the command is stopped at its limit, only what
# is there: summary.json (each step's status and seconds, every benchmark's JSON), targets.json
# (issue 8's targets: bench/device/targets.ts) and logs.tar.gz (each step's log, the benchmarks'
# JSON files, the targets report). Every step has a timeout, a failing step does not stop the next,
# and the summary is always written. Budget: MEMRA_DEVICE_BUDGET seconds (default 480): a step is
# cut to what is left of it, and once it is spent the remaining steps are skipped (summary.json says
# which), so that the run ends before the tool's timeout. MEMRA_DEVICE_ONLY='REGEX' runs only the
# steps whose names match it (a rerun of some steps on a machine still warm: its build is kept).
#   bash bench/device/run.sh
# The GPU machine has no Bun: first, here, `bash bench/device/bundle.sh pack` (writes .device/, about
# 40 MB: Bun and the runtime node_modules; with --cuda also native/build/libmemra_cuda.so as built
# here for sm_90, which saves the nvcc minute there), then run(command: "OUT=$OUT bash bench/device/run.sh",
# carry: [".device"], timeout_s: 540); this script unpacks them there (bundle.sh).
# MEMRA_DEVICE_DRY_RUN=1 runs the same steps without a GPU, on the CPU emulator of native/cuda and
# with tiny benchmark sizes (figures meaningless): a check of this script before a GPU session.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-bench/device/out}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# every step's log and benchmark JSON, packed into $OUT/logs.tar.gz after each step
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memra-device.XXXXXX")
SUMMARY="$OUT/summary.json"
STEPS=()
LAST_STATUS=0
START=$(date +%s)
BUDGET=${MEMRA_DEVICE_BUDGET:-480}
ONLY=${MEMRA_DEVICE_ONLY:-}

step() { # step NAME TIMEOUT_SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local log="$WORK/$name.log" began=$(date +%s) status=0
  local left=$(( START + BUDGET - began ))
  if [ -n "$ONLY" ] && ! [[ "$name" =~ $ONLY ]]; then
    STEPS+=("{\"step\":\"$name\",\"status\":null,\"skipped\":\"not selected\",\"seconds\":0}")
    LAST_STATUS=0 # no evidence either way: the fallbacks keyed on a step's failure stay off
    return 0
  fi
  if [ "$left" -lt 10 ]; then
    echo "== $name skipped: the budget of ${BUDGET}s is spent"
    STEPS+=("{\"step\":\"$name\",\"status\":null,\"skipped\":\"budget\",\"seconds\":0}")
    LAST_STATUS=125
    return 0
  fi
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 || status=$?
  local seconds=$(( $(date +%s) - began ))
  tail -n 5 "$log" | sed 's/^/   /'
  STEPS+=("{\"step\":\"$name\",\"status\":$status,\"seconds\":$seconds,\"log\":\"logs.tar.gz:$name.log\"}")
  LAST_STATUS=$status
  save
  return 0
}

write_summary() {
  local benches="[]"
  if ls "$WORK"/bench-*.json >/dev/null 2>&1; then benches="[$(cat "$WORK"/bench-*.json | paste -sd, -)]"; fi
  local gpu; gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo "none")
  printf '{"gpu":"%s","pdl":"%s","fusedNorm":"%s","repack":"%s","only":"%s","seconds":%d,"steps":[%s],"benchmarks":%s}\n' "${gpu:-none}" "${MEMRA_CUDA_PDL:-default}" "${MEMRA_CUDA_FUSED_NORM:-default}" \
    "${MEMRA_CUDA_REPACK:-default}" "$ONLY" $(( $(date +%s) - START )) \
    "$(IFS=,; echo "${STEPS[*]:-}")" "$benches" >"$SUMMARY.tmp"
  mv "$SUMMARY.tmp" "$SUMMARY"
}
# $OUT's files as they stand: replaced whole (written beside, then renamed), never half-written
save() {
  write_summary
  if [ -f "$WORK/targets.json" ]; then cp "$WORK/targets.json" "$OUT/targets.json.tmp" && mv "$OUT/targets.json.tmp" "$OUT/targets.json"; fi
  tar -czf "$OUT/logs.tar.gz.tmp" -C "$WORK" . && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
}
finish() {
  bun bench/device/targets.ts "$WORK" >"$WORK/targets.txt" 2>&1 || true
  save
  echo "== steps (status, seconds; logs in $OUT/logs.tar.gz)"
  local entry
  for entry in "${STEPS[@]:-}"; do
    [ -n "$entry" ] && echo "$entry" | sed -E 's/^\{"step":"([^"]*)","status":([^,]*),("skipped":"([^"]*)",)?"seconds":([0-9]*).*$/   \1  \2 \4 \5s/'
  done
  echo "summary: $SUMMARY"
  cat "$WORK/targets.txt"
  rm -rf "$WORK"
}
trap finish EXIT

# The GPU machine has no Bun and no registry: Bun and the runtime node_modules come from .device/
# (bash bench/device/bundle.sh pack here; `run` with carry [".device"]); nothing is unpacked where
# they are already present. Without vitest (not packed: a stand-in without vitest.mjs re-exports
# bun:test's functions), the test files run under `bun test`.
source bench/device/bundle.sh unpack
if [ -e node_modules/vitest/vitest.mjs ]; then
  TEST_RUN=(bun --bun vitest run)
  TESTS=packages/cuda-ffi/src
else
  # a test's own limit: minutes on the emulator (dry run), 2 on a GPU (a hung kernel fails its
  # test instead of taking the step's whole limit)
  TEST_RUN=(bun test --timeout "$([ "${MEMRA_DEVICE_DRY_RUN:-0}" = 1 ] && echo 600000 || echo 120000)")
  TESTS=./packages/cuda-ffi/src # a path, not a name filter
fi

DRY=()
# A forward benchmark's limit: the synthetic model is written first (the 8B shape: 8.7 GB, 8 of
# its 36 layers generated, about 60 s on the H200's machine for those); on the emulator (dry run)
# that bench takes about 330 s.
BENCH_LIMIT=240
# The op tests' and golden suite's limit: a minute or two on a GPU; the emulator runs every thread
# of every kernel on the CPU (the op tests alone take 3-5 minutes there on 2 busy cores).
TEST_LIMIT=180
if [ "${MEMRA_DEVICE_DRY_RUN:-0}" = 1 ]; then
  BENCH_LIMIT=600
  TEST_LIMIT=600
  BUDGET=${MEMRA_DEVICE_BUDGET:-7200}
  bun native/build.ts cuda-emulated
  export MEMRA_CUDA_LIBRARY="$PWD/native/build/libmemra_cuda_emulated.so"
  DRY=(--layers 1 --full-layers 1 --prompt 16 --decode 2 --runs 1 --batch 2 --batch-prompt 8)
fi
# what the machine is: the GPU and its driver, the compilers, the runtime (in logs.tar.gz)
step environment 30 bash -c 'nvidia-smi; nvcc --version; bun --version; python3 --version; uname -a; nproc; free -g; df -h .' 
# sm_90 (the H200) and its PTX only: a third of the nvcc work of the release build's three cubins.
# A library built here for sm_90 (bundle.sh pack --cuda: .device/libmemra_cuda.so.xz) saves the
# GPU machine the nvcc minute: where it loads and finds the GPU there, only the CPU library is
# built; else the CUDA library is built there as usual.
if [ -f .device/libmemra_cuda.so.xz ] && [ "${MEMRA_DEVICE_DRY_RUN:-0}" != 1 ]; then
  step build 120 bash -c 'bun native/build.ts cpu && mkdir -p native/build && { xz -dc .device/libmemra_cuda.so.xz 2>/dev/null || python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" .device/libmemra_cuda.so.xz; } >native/build/libmemra_cuda.prebuilt.so && MEMRA_CUDA_LIBRARY=$PWD/native/build/libmemra_cuda.prebuilt.so bun -e "const c = await import(\"./packages/cuda-ffi/src/index.ts\"); const why = c.cudaUnavailableReason(); if (why) { console.error(why); process.exit(1); } console.log(\"prebuilt libmemra_cuda.so loads and sees the GPU\")"'
  if [ "$LAST_STATUS" = 0 ]; then
    export MEMRA_CUDA_LIBRARY="$PWD/native/build/libmemra_cuda.prebuilt.so"
  else
    step build-cuda 240 env MEMRA_CUDA_ARCHS=90 bun native/build.ts cuda
  fi
else
  step build 240 env MEMRA_CUDA_ARCHS=90 bun native/build.ts all
fi
step native-tests 45 bash native/cuda/tests/run.sh
# Weights repacked on upload (in place, then read with 8- and 16-byte loads) have never run on a
# GPU: where the layouts' comparisons fail, with programmatic dependent launch and without, every
# later step keeps the file's layout (summary.json "repack"). The file's other tests (errors, the
# allocator after a failed upload) say nothing about the layouts and do not decide it.
REPACK_TESTS=("${TEST_RUN[@]}" "$TESTS/cuda-repack.test.ts" -t "repacks the|matmul on|q6_K: |embedding rows")
step repack-tests "$TEST_LIMIT" "${REPACK_TESTS[@]}"
if [ "$LAST_STATUS" != 0 ]; then
  step repack-tests-no-pdl "$TEST_LIMIT" env MEMRA_CUDA_PDL=0 "${REPACK_TESTS[@]}"
  if [ "$LAST_STATUS" != 0 ]; then export MEMRA_CUDA_REPACK=0; fi
fi
OP_TESTS=("${TEST_RUN[@]}" "$TESTS/cuda-backend.test.ts" "$TESTS/cuda-graphs.test.ts" "$TESTS/cuda-int8-gemm.test.ts")
step op-tests "$TEST_LIMIT" env MEMRA_PRINT_NMSE=1 "${OP_TESTS[@]}"
# Programmatic dependent launch (sm_90) has never run on a GPU before: where the op tests fail with
# it, once more without; if they pass then, every later step runs without it (summary.json "pdl").
if [ "$LAST_STATUS" != 0 ] && [ "${MEMRA_CUDA_PDL:-1}" != 0 ]; then
  step op-tests-no-pdl "$TEST_LIMIT" env MEMRA_CUDA_PDL=0 MEMRA_PRINT_NMSE=1 "${OP_TESTS[@]}"
  if [ "$LAST_STATUS" = 0 ]; then export MEMRA_CUDA_PDL=0; fi
fi
# The residual norm in the O and down projections' last block (a ticket over the launch's blocks)
# has never run on a GPU either: where its tests fail, every later step runs with the norms in
# launches of their own (summary.json "fusedNorm").
step norm-tail-tests "$TEST_LIMIT" "${TEST_RUN[@]}" "$TESTS/cuda-residual-norm.test.ts"
if [ "$LAST_STATUS" != 0 ]; then export MEMRA_CUDA_FUSED_NORM=0; fi

# The card's own ceilings (copy and read bandwidth, bf16 matrix rate, through PyTorch): what the
# kernels' figures are held to.
if [ "${MEMRA_DEVICE_DRY_RUN:-0}" != 1 ]; then
  step ceilings 60 bash -o pipefail -c "python3 bench/device/ceilings.py | tail -1 > '$WORK/bench-ceilings.json.tmp' && mv '$WORK/bench-ceilings.json.tmp' '$WORK/bench-ceilings.json'"
fi

# The issue's targets first (a GPU session's time is short: whatever is cut, these have run):
bench() { # [BENCH_ENV=NAME=VALUE] bench NAME ARGS...  (CUDA graphs never run on a GPU before: if the run fails, once more without them)
  local name=$1; shift
  local run="env ${BENCH_ENV:-} bun packages/cuda-ffi/bench/forward.bench.ts --json $* ${DRY[*]:-}"
  step "bench-$name" "$BENCH_LIMIT" bash -o pipefail -c "{ $run || { echo 'failed; again with --graphs 0' >&2; $run --graphs 0; }; } | tail -1 > '$WORK/bench-$name.json.tmp' && mv '$WORK/bench-$name.json.tmp' '$WORK/bench-$name.json'"
}
# --batch 64: aggregate decode of 64 sequences in one step (target: ≥ 20× batch 1).
bench qwen3-0.6b-q8_0 --preset qwen3-0.6b --type q8_0 --prompt 512 --decode 128 --batch 64
# (--profile 4: where a decode step's, the prefill's and a batch-64 step's time goes, on the same
# file loaded again without graphs after the figures; a minute less than a bench of its own)
bench qwen3-8b-shape-q8_0 --preset qwen3-0.6b --type q8_0 --layers 36 --distinct-layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 12288 --prompt 512 --decode 128 --batch 64 --profile 4
bench qwen3-30b-a3b-scaled-q8_0 --preset qwen3-30b-a3b-scaled --type q8_0 --prompt 512 --decode 128

step golden-suite "$TEST_LIMIT" "${TEST_RUN[@]}" "$TESTS/golden-suite.test.ts" "$TESTS/golden-suite-part-2.test.ts" "$TESTS/context-shift.test.ts"

# The pipelined int8 GEMM (gemm_int8_pipe_kernel: cp.async 4 k-tiles ahead, ldmatrix, and 64-row
# tiles for launches of up to 64 rows, where a batch-64 decode step's GEMMs filled half of each
# 128-row tile; opt-in with MEMRA_CUDA_INT8_PIPELINE=1 and never timed on a GPU): pp512 and batch 64 at both shapes, with the
# targets' benches' arguments (the same files), against them. The op tests above checked its bits
# against gemm_int8_kernel's (cuda-int8-gemm.test.ts).
BENCH_ENV=MEMRA_CUDA_INT8_PIPELINE=1 bench qwen3-0.6b-q8_0-int8-pipeline --preset qwen3-0.6b --type q8_0 --prompt 512 --decode 128 --batch 64
BENCH_ENV=MEMRA_CUDA_INT8_PIPELINE=1 bench qwen3-8b-shape-q8_0-int8-pipeline --preset qwen3-0.6b --type q8_0 --layers 36 --distinct-layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 12288 --prompt 512 --decode 128 --batch 64
BENCH_ENV=MEMRA_CUDA_INT8_PIPELINE=1 bench qwen3-30b-a3b-scaled-q8_0-int8-pipeline --preset qwen3-30b-a3b-scaled --type q8_0 --prompt 512 --decode 128
# Its single GEMMs (and the MoE experts' grouped ones) at the targets' shapes, TFLOP/s each, against
# the same ops of the "ops" step below (the default kernel).
PIPE_OPS=(--only gemm,moe)
if [ "${MEMRA_DEVICE_DRY_RUN:-0}" = 1 ]; then PIPE_OPS+=(--quick); fi
step ops-int8-pipeline 90 bash -o pipefail -c "MEMRA_CUDA_INT8_PIPELINE=1 bun packages/cuda-ffi/bench/ops.bench.ts --json ${PIPE_OPS[*]} | tail -1 > '$WORK/bench-ops-int8-pipeline.json.tmp' && mv '$WORK/bench-ops-int8-pipeline.json.tmp' '$WORK/bench-ops-int8-pipeline.json'"



# The variants below decode after 16 prompt tokens: the default settings the same way, to compare with.
bench qwen3-0.6b-q8_0-short --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# The 8B shape the same way, and first the variant whose effect no GPU run has measured yet (the
# second run of 2026-12-04 ran out of its budget before it).
EIGHT_B=(--preset qwen3-0.6b --type q8_0 --layers 36 --distinct-layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 12288 --prompt 16 --decode 128)
bench qwen3-8b-shape-q8_0-short "${EIGHT_B[@]}"
# q8_0_x8 decode with 8-byte loads of codes a lane (by default 16: a warp's load covers two
# groups): what the wide loads save, at both shapes.
BENCH_ENV=MEMRA_CUDA_MMV_WIDE=0 bench qwen3-0.6b-q8_0-no-wide --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
BENCH_ENV=MEMRA_CUDA_MMV_WIDE=0 bench qwen3-8b-shape-q8_0-no-wide "${EIGHT_B[@]}"
# The same decode with every op launched (no CUDA graphs): what the graphs save at batch 1; and 4
# more steps with every launch timed (`profile`: µs per step of each kernel, the gaps between
# kernels included, and the last step's launches in order): where a decode step's time goes (the
# 8B shape's bench above profiles its decode step, its 512-token prefill and a decode step of 64
# sequences: `prefillProfile`, `batchProfile`, where pp512's and batch 64's time goes).
bench qwen3-0.6b-q8_0-no-graphs --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128 --graphs 0 --profile 4
# (Single ops and the PyTorch anchor come after the variants above, which a budget-cut run needs
# more: the first run of 2026-12-04 measured them, and the previous kernels' ops come last.)
# Single ops at the targets' shapes (matvec bandwidth, GEMM TFLOP/s, decode attention, fused norm,
# argmax, top-k, MoE experts), with the default kernels and with the previous ones (the f16-code
# GEMM for q8_0/q4_0/q5_0 prefill, 2 steps in flight in q8_0 decode, the f32 k-quant decode,
# decode loading its weights only after the kernel before it has finished, q8_0 weights in the
# file's layout): where a forward's time
# goes. The previous kernels also give each decode feature one warp (MEMRA_CUDA_MMV_SPLIT=1).
OPS=()
if [ "${MEMRA_DEVICE_DRY_RUN:-0}" = 1 ]; then OPS=(--quick); fi
step ops 120 bash -o pipefail -c "bun packages/cuda-ffi/bench/ops.bench.ts --json ${OPS[*]:-} | tail -1 > '$WORK/bench-ops.json.tmp' && mv '$WORK/bench-ops.json.tmp' '$WORK/bench-ops.json'"

# PyTorch + transformers on the same dense shapes (bf16, random weights): a second anchor.
torch_bench() { # torch_bench NAME ARGS...
  local name=$1; shift
  step "torch-$name" 120 bash -o pipefail -c "python3 bench/device/torch-qwen3.py $* | tail -1 > '$WORK/bench-torch-$name.json.tmp' && mv '$WORK/bench-torch-$name.json.tmp' '$WORK/bench-torch-$name.json'"
}
if [ "${MEMRA_DEVICE_DRY_RUN:-0}" != 1 ]; then
  torch_bench qwen3-0.6b
  torch_bench qwen3-8b-shape --hidden 4096 --heads 32 --kv-heads 8 --ffn 12288 --layers 8 --full-layers 36
fi

# Every kernel launched without programmatic dependent launch (each begins launching only once the
# one before has finished): what PDL saves at batch 1.
BENCH_ENV=MEMRA_CUDA_PDL=0 bench qwen3-0.6b-q8_0-no-pdl --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# q8_0 decode loading its first weights only once the kernel before it has finished (they are
# loaded while it finishes, by default): what that saves at batch 1.
BENCH_ENV=MEMRA_CUDA_EARLY_WEIGHTS=0 bench qwen3-0.6b-q8_0-late-weights --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# Every decode feature on one warp (by default the O and down projections of this shape, 1,024
# features of 2,048 and 3,072 inputs, are split over 2 and 4 warps): what the split saves at batch 1.
BENCH_ENV=MEMRA_CUDA_MMV_SPLIT=1 bench qwen3-0.6b-q8_0-no-split --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# QK-norm, RoPE and the K/V write in a launch of their own before the attention (by default in the
# attention kernel): what the fused kernel saves at batch 1.
BENCH_ENV=MEMRA_CUDA_FUSED_ATTENTION=0 bench qwen3-0.6b-q8_0-qk-apart --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# SwiGLU rounded for the down projection by the gate/up kernel's last block of each 32 features
# (by default in a launch of its own since the fourth run of 2026-12-04, which timed the fused form
# 20% slower at batch 1): what the fusion does now.
BENCH_ENV=MEMRA_CUDA_FUSED_FFN=1 bench qwen3-0.6b-q8_0-swiglu-fused --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# The residual add and the next RMSNorm in the last block of the O and down projections' kernels
# (by default in the next op's launch since the same run: 12% slower fused): what that does now.
BENCH_ENV=MEMRA_CUDA_FUSED_NORM=1 bench qwen3-0.6b-q8_0-norms-fused --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# A decode graph's five index arrays copied by five copy nodes inside the graph (by default one
# copy before each replay): what that saves at batch 1.
BENCH_ENV=MEMRA_CUDA_GRAPH_INPUT_COPY=0 bench qwen3-0.6b-q8_0-input-nodes --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
# q8_0 weights in the file's layout (by default each 8 blocks' scales then their codes, aligned:
# one 8-byte load of codes a lane where a 34-byte block takes five 2-byte loads): what the repack
# saves, at the 0.6B shape and at the 8B shape (bound by the weights' bandwidth; against its own
# 16-token-prompt baseline).
BENCH_ENV=MEMRA_CUDA_REPACK=0 bench qwen3-0.6b-q8_0-no-repack --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128
BENCH_ENV=MEMRA_CUDA_REPACK=0 bench qwen3-8b-shape-q8_0-no-repack "${EIGHT_B[@]}"
# Sampled decode (llama.cpp's default chain, seeded) at batch 1 and 64: from the 40 best
# candidates picked on the GPU (Backend.topKRows), and from every step's whole logits read back
# and sampled on the host (the path before topKRows; also what a greedy pick on the GPU saves).
bench qwen3-0.6b-q8_0-sample --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128 --batch 64 --pick sample
bench qwen3-0.6b-q8_0-host-sample --preset qwen3-0.6b --type q8_0 --prompt 16 --decode 128 --batch 64 --pick host-sample
# The previous kernels' single ops (see "Single ops" above), last.
step ops-previous-kernels 120 bash -o pipefail -c "MEMRA_CUDA_REPACK=0 MEMRA_CUDA_MMV_WIDE=0 MEMRA_CUDA_INT8_GEMM=0 MEMRA_CUDA_MMV_STEPS=2 MEMRA_CUDA_CODES_DP4A=0 MEMRA_CUDA_EARLY_WEIGHTS=0 MEMRA_CUDA_MMV_SPLIT=1 bun packages/cuda-ffi/bench/ops.bench.ts --json ${OPS[*]:-} | tail -1 > '$WORK/bench-ops-previous-kernels.json.tmp' && mv '$WORK/bench-ops-previous-kernels.json.tmp' '$WORK/bench-ops-previous-kernels.json'"
