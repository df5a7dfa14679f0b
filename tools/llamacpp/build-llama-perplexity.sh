#!/usr/bin/env bash
# Builds llama.cpp's llama-perplexity (tools/perplexity/main.cpp and perplexity.cpp, unchanged, plus
# the logger-draining destructor) against node-llama-cpp's prebuilt libraries (see llama-tool-build.sh).
#
#   tools/llamacpp/build-llama-perplexity.sh         # → tools/llamacpp/build/llama-perplexity
source "$(dirname "${BASH_SOURCE[0]}")/llama-tool-build.sh"
build_llama_tool llama-perplexity "-O2" --log-flush tools/perplexity/main.cpp tools/perplexity/perplexity.cpp
