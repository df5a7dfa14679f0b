#!/usr/bin/env bash
# The CUDA op tests on the CPU emulator under AddressSanitizer: every kernel's every access to
# device memory (host memory there) is checked, and the bytes of each allocation's size class past
# those asked for are poisoned (native/cuda/context.cu), so a kernel that reads or writes past the
# end of its tensor fails here, where on a GPU it reads the padding unnoticed and the results stay
# right. Bun is not instrumented: libasan is preloaded into it.
#   bash native/cuda/tests/asan-op-tests.sh                 the op test files (~9 minutes on 2 cores)
#   bash native/cuda/tests/asan-op-tests.sh FILE... [-t NAME]  these test files only
# A compiler without the ASan runtime: a notice, exit 0 (as native/cuda/tests/run.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
CXX=${CXX:-c++}
libasan=$("$CXX" -print-file-name=libasan.so)
if [ ! -f "$libasan" ]; then
  echo "asan-op-tests.sh: $CXX has no libasan.so: skipped"
  exit 0
fi
bun native/build.ts cuda-emulated-asan
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(packages/cuda-ffi/src/cuda-backend.test.ts packages/cuda-ffi/src/cuda-graphs.test.ts packages/cuda-ffi/src/cuda-int8-gemm.test.ts
    packages/cuda-ffi/src/cuda-repack.test.ts packages/cuda-ffi/src/cuda-residual-norm.test.ts)
fi
# Bun's own allocations are never freed at exit: no leak report. The first error ends the process
# (the test file fails, naming the kernel and the allocation).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}
# The instrumented kernels run several times slower than the plain emulated build: tests that keep
# vitest's default timeout get 10 minutes.
LD_PRELOAD="$libasan" MEMRA_CUDA_LIBRARY="$PWD/native/build/libmemra_cuda_emulated_asan.so" bun --bun vitest run --testTimeout=600000 "${files[@]}"
