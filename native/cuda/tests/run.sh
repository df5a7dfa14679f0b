#!/bin/sh
# Tests of native/cuda that need no GPU:
#   1. the launch plans (launch-plan.c), built with the C compiler and again as C++;
#   2. the CPU emulator of CUDA (emulator/, which the cuda-emulated build runs the kernels on),
#      built with the C++ compiler and the emulated build's flags, then again with AddressSanitizer
#      (it switches stacks between fibers: the annotations for that are checked too); no nvcc;
#   3. every kernel begins with memra_grid_dependencies() (programmatic dependent launch);
#   4. when native/build/libmemra_cuda.so exists (bun native/build.ts cuda): the library loads and
#      reports a missing driver/GPU as error codes with messages (on a GPU machine: the device
#      checks are skipped, the rest still runs).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build="$here/build"
mkdir -p "$build"
CC=${CC:-cc}
CXX=${CXX:-c++}
includes="-I$here/.. -I$here/../../include"

"$CC" -O2 -std=c11 -Wall -Wextra -Werror $includes "$here/../launch-plan.c" "$here/test-launch-plan.c" -o "$build/test-launch-plan"
"$build/test-launch-plan"
"$CXX" -O2 -std=c++17 -Wall -Wextra -Werror -x c++ $includes "$here/../launch-plan.c" "$here/test-launch-plan.c" -o "$build/test-launch-plan-cxx"
"$build/test-launch-plan-cxx"

# The flags of EMULATED_CXX_FLAGS in native/build.ts (less -fPIC/-fvisibility: an executable).
emulated="-x c++ -std=c++17 -ffp-contract=off -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -Werror -DMEMRA_CUDA_EMULATED=1 -I$here/../emulator/include $includes"
emulator_sources="$here/test-emulator.cpp $here/../emulator/emulator.cpp"
"$CXX" -O2 $emulated $emulator_sources -pthread -o "$build/test-emulator"
# threads and blocks in other orders (MEMRA_CUDA_EMULATOR_SCHEDULE): the same checks hold
MEMRA_CUDA_EMULATOR_SCHEDULE=reverse "$build/test-emulator" reverse
MEMRA_CUDA_EMULATOR_SCHEDULE=random "$build/test-emulator" random
"$build/test-emulator"
# A compiler without the ASan runtime skips this run; the plain build above has already caught
# any error in the sources.
if "$CXX" -O1 -fsanitize=address -fno-omit-frame-pointer $emulated $emulator_sources -pthread -o "$build/test-emulator-asan"; then
    "$build/test-emulator-asan"
else
    echo "run.sh: $CXX cannot build with -fsanitize=address: ASan run of test-emulator skipped"
fi

# Programmatic dependent launch lets a kernel start while the one before it finishes: every kernel
# must wait for it (memra_grid_dependencies(), kernels/device.cuh) before it touches memory, so the
# call must be its first statement. The one exception, matrix_vector_q8_0_kernel, loads weights
# (which no kernel writes) first when early_weights is set, and waits before anything else: its
# first statement is "if (!early_weights) memra_grid_dependencies();". Checked in the sources, as
# no GPU runs here.
awk '
    /__global__/ { kernel = FNR }
    kernel && /\{$/ {
        if ((getline next_line) <= 0 || next_line !~ /^ *(if \(!early_weights\) )?memra_grid_dependencies\(\);/) {
            printf "%s:%d: a kernel whose first statement is not memra_grid_dependencies();\n", FILENAME, kernel
            bad = 1
        }
        kernel = 0
    }
    END { exit bad }
' "$here"/../*.cu "$here"/../kernels/*.cuh
echo "run.sh: every kernel begins with memra_grid_dependencies()"

library="${MEMRA_CUDA_LIBRARY:-$here/../../build/libmemra_cuda.so}"
if [ -f "$library" ]; then
    "$CC" -O2 -std=gnu11 -Wall -Wextra -Werror $includes "$here/test-no-device.c" -ldl -o "$build/test-no-device"
    "$build/test-no-device" "$library"
else
    echo "run.sh: $library not built (bun native/build.ts cuda): library checks skipped"
fi
