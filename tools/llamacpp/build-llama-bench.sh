#!/usr/bin/env bash
# Builds llama.cpp's llama-bench (tools/llama-bench/main.cpp and llama-bench.cpp, unchanged) against
# node-llama-cpp 3.21.1's prebuilt shared libraries, into tools/llamacpp/build/ (git-ignored), as
# build-llama-perplexity.sh builds llama-perplexity: the prebuilt package ships libllama-common.so
# (llama.cpp's `common`) besides libllama and libggml, so those two are the only sources compiled, with
# the headers of the same release (the source bundled with node-llama-cpp, cloned to /tmp/llama-src
# when absent). llama-bench-goldens.ts runs it for packages/cli/src/__fixtures__/llama-bench-goldens.json.
#
#   tools/llamacpp/build-llama-bench.sh              # → tools/llamacpp/build/llama-bench
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins="$here/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
source_dir="${LLAMA_SRC:-/tmp/llama-src}"
out="$here/build"

if [ ! -f "$bins/libllama-common.so" ]; then
  echo "no prebuilt libraries at $bins: run \`npm ci\` in tools/llamacpp first" >&2
  exit 1
fi
if [ ! -f "$source_dir/tools/llama-bench/llama-bench.cpp" ]; then
  git clone --quiet "$here/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$source_dir"
fi

mkdir -p "$out"
# ggml loads its CPU backend from the executable's folder
for library in "$bins"/libggml-cpu-*.so; do ln -sf "$library" "$out/"; done

g++ -std=c++17 -O2 -DNDEBUG -pthread \
  -I"$source_dir/common" -I"$source_dir/include" -I"$source_dir/ggml/include" \
  "$source_dir/tools/llama-bench/main.cpp" "$source_dir/tools/llama-bench/llama-bench.cpp" -o "$out/llama-bench" \
  -L"$bins" -l:libllama-common.so -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
  -Wl,-rpath,"$bins"

echo "$out/llama-bench"
