#!/bin/sh
# Builds native/cpu/quant-dot.c as the backend does (-O3, no -march: run-time dispatch) and runs its tests.
#   ./run.sh                 correctness checks on every SIMD path of this CPU, the GEMM kernels against
#                            the dot products, then the dispatch under
#                            each forced MEMRA_CPU_ISA
#   ./run.sh bench [types]   4096 x 4096 matrix-vector GB/s per type (e.g. q8_0 q4_K), once per path
#   ./run.sh bench-gemm      single-thread GMAC/s of the GEMM tiles vs the four-row dot products
#   ./run.sh asan            the checks built with AddressSanitizer + UBSan (-O1), then the portable
#                            path alone (-DMEMRA_NO_SIMD), as a non-x86 build runs it
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build="$here/build"
mkdir -p "$build"
CC=${CC:-cc}

if [ "${1:-}" = "asan" ]; then
    san="-O1 -g -std=c11 -fsanitize=address,undefined -fno-sanitize-recover=all"
    $CC $san -c "$here/../quant-dot.c" -o "$build/quant-dot-asan.o"
    $CC $san "$here/test-quant-dot.c" "$build/quant-dot-asan.o" -lm -o "$build/test-quant-dot-asan"
    "$build/test-quant-dot-asan"
    $CC $san -c "$here/../gemm.c" -o "$build/gemm-asan.o"
    $CC $san "$here/test-gemm.c" "$build/gemm-asan.o" "$build/quant-dot-asan.o" -lm -o "$build/test-gemm-asan"
    "$build/test-gemm-asan"
    $CC -O3 -std=c11 -Wall -Wextra -Werror -DMEMRA_NO_SIMD -c "$here/../quant-dot.c" -o "$build/quant-dot-nosimd.o"
    $CC -O2 -std=c11 "$here/test-quant-dot.c" "$build/quant-dot-nosimd.o" -lm -o "$build/test-quant-dot-nosimd"
    "$build/test-quant-dot-nosimd"
    exit 0
fi

"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../quant-dot.c" -o "$build/quant-dot.o"
"$CC" -O2 -std=c11 -Wall -Wextra -Werror "$here/test-quant-dot.c" "$build/quant-dot.o" -lm -o "$build/test-quant-dot"
"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../gemm.c" -o "$build/gemm.o"
"$CC" -O2 -std=c11 -Wall -Wextra -Werror "$here/test-gemm.c" "$build/gemm.o" "$build/quant-dot.o" -lm -o "$build/test-gemm"

if [ "${1:-}" = "bench-gemm" ]; then
    "$build/test-gemm" bench
    exit 0
fi

if [ "${1:-}" = "bench" ]; then
    shift
    for isa in avx512vnni avx2 scalar; do
        got=$(MEMRA_CPU_ISA=$isa "$build/test-quant-dot" isa)
        if [ "$got" = "$isa" ]; then MEMRA_CPU_ISA=$isa "$build/test-quant-dot" bench "$@"; echo; fi
    done
    exit 0
fi

"$build/test-quant-dot"
"$build/test-gemm"
MEMRA_GEMM=0 "$build/test-gemm" | head -1
for isa in scalar avx2 avx512vnni; do
    got=$(MEMRA_CPU_ISA=$isa "$build/test-quant-dot" isa)
    echo "MEMRA_CPU_ISA=$isa -> memra_dot_isa() = $got"
done
