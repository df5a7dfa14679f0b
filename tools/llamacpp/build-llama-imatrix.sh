#!/usr/bin/env bash
# Builds llama.cpp's llama-imatrix (tools/imatrix/imatrix.cpp, unchanged, plus the logger-draining
# destructor: the end of --show-statistics was now and then lost) against node-llama-cpp's prebuilt
# libraries (see llama-tool-build.sh): imatrix.cpp is the only source compiled.
#
#   tools/llamacpp/build-llama-imatrix.sh            # → tools/llamacpp/build/llama-imatrix
source "$(dirname "${BASH_SOURCE[0]}")/llama-tool-build.sh"
build_llama_tool llama-imatrix "-O1" --log-flush tools/imatrix/imatrix.cpp
