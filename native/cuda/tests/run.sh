#!/bin/sh
# Tests of native/cuda that need no GPU:
#   1. the launch plans (launch-plan.c), built with the C compiler and again as C++;
#   2. when native/build/libmemra_cuda.so exists (bun native/build.ts cuda): the library loads and
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

library="${MEMRA_CUDA_LIBRARY:-$here/../../build/libmemra_cuda.so}"
if [ -f "$library" ]; then
    "$CC" -O2 -std=gnu11 -Wall -Wextra -Werror $includes "$here/test-no-device.c" -ldl -o "$build/test-no-device"
    "$build/test-no-device" "$library"
else
    echo "run.sh: $library not built (bun native/build.ts cuda): library checks skipped"
fi
