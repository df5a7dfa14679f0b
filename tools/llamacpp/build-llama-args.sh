#!/usr/bin/env bash
# Builds llama-args (llama-args.cpp: llama.cpp's own command-line parser from the prebuilt
# libllama-common.so, asked which flags llama-completion, llama-cli and llama-server take and what
# it makes of a command line) against node-llama-cpp's prebuilt libraries (see llama-tool-build.sh);
# llama-args-goldens.ts runs it for packages/cli/src/__fixtures__/llama-args-goldens.json.
#
#   tools/llamacpp/build-llama-args.sh              # → tools/llamacpp/build/llama-args
source "$(dirname "${BASH_SOURCE[0]}")/llama-tool-build.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_llama_tool llama-args "-O1" "$here/llama-args.cpp"
