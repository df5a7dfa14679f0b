#!/usr/bin/env bash
# Builds llama.cpp's llama-bench (tools/llama-bench/main.cpp and llama-bench.cpp, unchanged) against
# node-llama-cpp's prebuilt libraries (see llama-tool-build.sh); llama-bench-goldens.ts runs it for
# packages/cli/src/__fixtures__/llama-bench-goldens.json.
#
#   tools/llamacpp/build-llama-bench.sh              # → tools/llamacpp/build/llama-bench
source "$(dirname "${BASH_SOURCE[0]}")/llama-tool-build.sh"
build_llama_tool llama-bench "-O2 -DNDEBUG" tools/llama-bench/main.cpp tools/llama-bench/llama-bench.cpp
