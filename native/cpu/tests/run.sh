#!/bin/sh
# Builds native/cpu/quant-dot.c as the backend does (-O3, no -march: run-time dispatch) and runs its tests.
#   ./run.sh                 correctness checks on every SIMD path of this CPU (and of dequantize.c), the GEMM kernels against
#                            the dot products, the quantizers (quantize*.c) with and without importance, their lane searches'
#                            bytes on the default and the portable path compared, then the dispatch under
#                            each forced MEMRA_CPU_ISA
#   ./run.sh bench [types]   4096 x 4096 matrix-vector GB/s per type (e.g. q8_0 q4_K), once per path
#   ./run.sh bench-gemm      single-thread GMAC/s of the GEMM tiles vs the four-row dot products
#   ./run.sh asan            the checks built with AddressSanitizer + UBSan (-O1), then the portable
#                            path alone (-DMEMRA_NO_SIMD), as a non-x86 build runs it
#   ./run.sh neon            quant-dot cross-compiled for AArch64 (aarch64-linux-gnu-gcc, -static) and run
#                            under qemu-aarch64: every path on qemu's "max" CPU (scalar, neon, neondot),
#                            the dispatch with and without MEMRA_CPU_ISA, and on a Cortex-A53 (no dotprod)
#                            that "neon" is chosen; skipped (exit 0) when those tools are missing
#                            (Debian: apt-get install gcc-aarch64-linux-gnu qemu-user)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build="$here/build"
mkdir -p "$build"
CC=${CC:-cc}

if [ "${1:-}" = "asan" ]; then
    san="-O1 -g -std=c11 -fsanitize=address,undefined -fno-sanitize-recover=all"
    $CC $san -c "$here/../quant-dot.c" -o "$build/quant-dot-asan.o"
    $CC $san -I"$here/../../include" -c "$here/../dequantize.c" -o "$build/dequantize-asan.o"
    $CC $san "$here/test-quant-dot.c" "$build/quant-dot-asan.o" "$build/dequantize-asan.o" -lm -o "$build/test-quant-dot-asan"
    "$build/test-quant-dot-asan"
    $CC $san -c "$here/../gemm.c" -o "$build/gemm-asan.o"
    $CC $san -c "$here/../gemm-float.c" -o "$build/gemm-float-asan.o"
    $CC $san "$here/test-gemm.c" "$build/gemm-asan.o" "$build/gemm-float-asan.o" "$build/quant-dot-asan.o" -lm -o "$build/test-gemm-asan"
    "$build/test-gemm-asan"
    $CC $san -pthread -Wno-unused-parameter -I"$here/../../include" "$here/test-quantize.c" "$here"/../quantize*.c "$build/quant-dot-asan.o" \
        "$build/dequantize-asan.o" -lm -o "$build/test-quantize-asan"
    "$build/test-quantize-asan"
    $CC -O3 -std=c11 -Wall -Wextra -Werror -DMEMRA_NO_SIMD -c "$here/../quant-dot.c" -o "$build/quant-dot-nosimd.o"
    $CC -O3 -std=c11 -Wall -Wextra -Werror -I"$here/../../include" -c "$here/../dequantize.c" -o "$build/dequantize.o"
    $CC -O2 -std=c11 "$here/test-quant-dot.c" "$build/quant-dot-nosimd.o" "$build/dequantize.o" -lm -o "$build/test-quant-dot-nosimd"
    "$build/test-quant-dot-nosimd"
    exit 0
fi

if [ "${1:-}" = "neon" ]; then
    XCC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
    QEMU=${QEMU_AARCH64:-qemu-aarch64}
    if ! command -v "$XCC" >/dev/null 2>&1 || ! command -v "$QEMU" >/dev/null 2>&1; then
        echo "neon: skipped ($XCC or $QEMU not found)"
        exit 0
    fi
    "$XCC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../quant-dot.c" -o "$build/quant-dot-a64.o"
    "$XCC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -I"$here/../../include" -c "$here/../dequantize.c" -o "$build/dequantize-a64.o"
    "$XCC" -O2 -std=c11 -Wall -Wextra -Werror -static "$here/test-quant-dot.c" "$build/quant-dot-a64.o" "$build/dequantize-a64.o" -lm -o "$build/test-quant-dot-a64"
    "$XCC" -O3 -std=c11 -Wall -Wextra -Werror -DMEMRA_NO_SIMD -c "$here/../quant-dot.c" -o "$build/quant-dot-a64-nosimd.o"
    "$XCC" -O2 -std=c11 -Wall -Wextra -Werror -static "$here/test-quant-dot.c" "$build/quant-dot-a64-nosimd.o" "$build/dequantize-a64.o" -lm -o "$build/test-quant-dot-a64-nosimd"
    # the whole library compiles and links for AArch64 with the flags of native/build.ts
    mkdir -p "$build/a64-lib"
    for source in "$here"/../*.c; do
        "$XCC" -std=c11 -O3 -fPIC -fvisibility=hidden -pthread -Wall -Wextra -Wno-unused-parameter -Werror -I"$here/../../include" \
            -c "$source" -o "$build/a64-lib/$(basename "$source" .c).o"
    done
    "$XCC" -shared -pthread "$build"/a64-lib/*.o -lm -o "$build/a64-lib/libmemra_cpu.so"
    echo "== libmemra_cpu.so for AArch64: compiled and linked"
    t="$build/test-quant-dot-a64"
    # runs "$@" and prints its last line (all of its output if it fails, and then fails)
    last_line() {
        if "$@" > "$build/neon-run.log" 2>&1; then tail -1 "$build/neon-run.log"; else cat "$build/neon-run.log"; return 1; fi
    }
    echo "== qemu-aarch64 -cpu max (dotprod)"
    "$QEMU" "$t"
    echo "== qemu-aarch64 -cpu max, MEMRA_CPU_ISA=neon"
    last_line env MEMRA_CPU_ISA=neon "$QEMU" "$t"
    echo "== qemu-aarch64 -cpu cortex-a53 (no dotprod)"
    "$QEMU" -cpu cortex-a53 "$t"
    echo "== qemu-aarch64, portable build (-DMEMRA_NO_SIMD)"
    last_line "$QEMU" "$build/test-quant-dot-a64-nosimd"
    # AddressSanitizer + UBSan: linked dynamically (the sanitizers need it), qemu loads the AArch64
    # libraries from the cross sysroot; LeakSanitizer cannot run under qemu
    sysroot=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
    if "$XCC" -O1 -g -std=c11 -fsanitize=address,undefined -fno-sanitize-recover=all -I"$here/../../include" "$here/test-quant-dot.c" "$here/../quant-dot.c" "$here/../dequantize.c" \
        -lm -o "$build/test-quant-dot-a64-asan" 2>/dev/null; then
        for cpu in max cortex-a53; do
            echo "== qemu-aarch64 -cpu $cpu, AddressSanitizer + UBSan (-O1)"
            last_line env ASAN_OPTIONS=detect_leaks=0 QEMU_LD_PREFIX="$sysroot" "$QEMU" -cpu "$cpu" "$build/test-quant-dot-a64-asan"
        done
    else
        echo "== AddressSanitizer build for AArch64: skipped (no AArch64 libasan/libubsan)"
    fi
    # the dispatch: "cpu flags env" -> the path memra_dot_isa() must report
    status=0
    for case in "max - neondot" "max neon neon" "max neondot neondot" "max scalar scalar" \
                "cortex-a53 - neon" "cortex-a53 neondot neon" "cortex-a53 scalar scalar"; do
        set -- $case
        if [ "$2" = "-" ]; then got=$("$QEMU" -cpu "$1" "$t" isa); else got=$(MEMRA_CPU_ISA=$2 "$QEMU" -cpu "$1" "$t" isa); fi
        echo "qemu -cpu $1, MEMRA_CPU_ISA=$2 -> memra_dot_isa() = $got"
        if [ "$got" != "$3" ]; then echo "FAIL: expected $3"; status=1; fi
    done
    exit $status
fi

"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../quant-dot.c" -o "$build/quant-dot.o"
"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -I"$here/../../include" -c "$here/../dequantize.c" -o "$build/dequantize.o"
"$CC" -O2 -std=c11 -Wall -Wextra -Werror "$here/test-quant-dot.c" "$build/quant-dot.o" "$build/dequantize.o" -lm -o "$build/test-quant-dot"
"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../gemm.c" -o "$build/gemm.o"
"$CC" -O3 -std=c11 -fPIC -Wall -Wextra -Werror -c "$here/../gemm-float.c" -o "$build/gemm-float.o"
"$CC" -O2 -std=c11 -Wall -Wextra -Werror "$here/test-gemm.c" "$build/gemm.o" "$build/gemm-float.o" "$build/quant-dot.o" -lm -o "$build/test-gemm"

# quantize*.c with the library's flags (native/build.ts)
"$CC" -O3 -std=c11 -pthread -Wall -Wextra -Wno-unused-parameter -Werror -I"$here/../../include" "$here/test-quantize.c" "$here"/../quantize*.c \
    "$build/quant-dot.o" "$build/dequantize.o" -lm -o "$build/test-quantize"

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
if [ "$(MEMRA_CPU_ISA=avx512vnni "$build/test-quant-dot" isa)" = avx512vnni ]; then
    echo "== the AVX-512 bf16 tiles without vdpbf16ps (MEMRA_NO_AVX512BF16=1)"
    MEMRA_NO_AVX512BF16=1 MEMRA_CPU_ISA=avx512vnni "$build/test-gemm"
fi
MEMRA_GEMM=0 "$build/test-gemm" | head -1
echo "== quantize*.c: the vector lane searches (dot products: $("$build/test-quant-dot" isa)), then the portable ones (scalar): the same bytes"
"$build/test-quantize" > "$build/quantize-default.txt" || { cat "$build/quantize-default.txt"; exit 1; }
MEMRA_CPU_ISA=scalar "$build/test-quantize" > "$build/quantize-scalar.txt" || { cat "$build/quantize-scalar.txt"; exit 1; }
cat "$build/quantize-default.txt"
if ! cmp -s "$build/quantize-default.txt" "$build/quantize-scalar.txt"; then
    echo "FAIL: the portable lane searches give other bytes:"
    diff "$build/quantize-default.txt" "$build/quantize-scalar.txt"
    exit 1
fi
for isa in scalar avx2 avx512vnni; do
    got=$(MEMRA_CPU_ISA=$isa "$build/test-quant-dot" isa)
    echo "MEMRA_CPU_ISA=$isa -> memra_dot_isa() = $got"
done
