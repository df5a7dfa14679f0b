#!/usr/bin/env bash
# Builds llama.cpp's llama-imatrix (tools/imatrix/imatrix.cpp, unchanged) against node-llama-cpp
# 3.21.1's prebuilt shared libraries, into tools/llamacpp/build/ (git-ignored). Nothing of llama or
# ggml is rebuilt: the prebuilt package ships libllama-common.so (llama.cpp's `common`: argument
# parsing, common_init_from_params, common_tokenize, common_imatrix_load, ...) besides libllama and
# libggml, so imatrix.cpp is the only source compiled. The headers are those of the same release
# (the source bundled with node-llama-cpp, cloned to /tmp/llama-src when absent).
#
#   tools/llamacpp/build-llama-imatrix.sh            # → tools/llamacpp/build/llama-imatrix
#
# ggml loads its CPU backend (the best libggml-cpu-<variant>.so for this CPU) from the executable's
# folder, so the build folder gets links to the prebuilt backend libraries and the binary runs from
# any working directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins="$here/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
source_dir="${LLAMA_SRC:-/tmp/llama-src}"
out="$here/build"

if [ ! -f "$bins/libllama-common.so" ]; then
  echo "no prebuilt libraries at $bins: run \`npm ci\` in tools/llamacpp first" >&2
  exit 1
fi
if [ ! -f "$source_dir/tools/imatrix/imatrix.cpp" ]; then
  git clone --quiet "$here/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$source_dir"
fi

mkdir -p "$out"
for library in "$bins"/libggml-cpu-*.so; do ln -sf "$library" "$out/"; done

# llama.cpp's logger writes from a thread of its own and leaks it at exit (llama.cpp issue 22142),
# so the last lines (the end of --show-statistics) are now and then lost: a destructor of our own
# drains it before the process ends. Nothing else is added to imatrix.cpp.
printf '%s\n' '#include "log.h"' \
  '__attribute__((destructor)) static void log_flush_at_exit() { common_log_pause(common_log_main()); }' \
  > "$out/log-flush-at-exit.cpp"

g++ -std=c++17 -O1 -pthread \
  -I"$source_dir/common" -I"$source_dir/include" -I"$source_dir/ggml/include" \
  "$source_dir/tools/imatrix/imatrix.cpp" "$out/log-flush-at-exit.cpp" -o "$out/llama-imatrix" \
  -L"$bins" -l:libllama-common.so -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
  -Wl,-rpath,"$bins"

echo "$out/llama-imatrix"
