# Sourced by build-llama-imatrix.sh, build-llama-perplexity.sh and build-llama-bench.sh: builds one of
# llama.cpp's tools, its sources unchanged, against node-llama-cpp 3.21.1's prebuilt shared libraries
# into tools/llamacpp/build/ (git-ignored). Nothing of llama or ggml is rebuilt: the prebuilt package
# ships libllama-common.so (llama.cpp's `common`) besides libllama and libggml. The headers are those
# of the same release (the source bundled with node-llama-cpp, cloned to /tmp/llama-src when absent).
#
#   build_llama_tool NAME "FLAGS" [--log-flush] SOURCE...   # SOURCE relative to the llama.cpp tree, or absolute
#
# ggml loads its CPU backend (the best libggml-cpu-<variant>.so for this CPU) from the executable's
# folder, so the build folder gets links to the prebuilt backend libraries and the binary runs from
# any working directory. --log-flush adds a destructor that drains llama.cpp's logger: it writes from
# a thread of its own and leaks it at exit (llama.cpp issue 22142), so the last lines are now and then
# lost otherwise. Nothing else is added to the tool's sources.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins="$here/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
source_dir="${LLAMA_SRC:-/tmp/llama-src}"
out="$here/build"

build_llama_tool() {
  local name="$1" flags="$2"
  shift 2
  local extra=()
  if [ "${1:-}" = "--log-flush" ]; then
    shift
    extra=("$out/log-flush-at-exit.cpp")
  fi
  if [ ! -f "$bins/libllama-common.so" ]; then
    echo "no prebuilt libraries at $bins: run \`npm ci\` in tools/llamacpp first" >&2
    exit 1
  fi
  if [ ! -f "$source_dir/include/llama.h" ]; then
    git clone --quiet "$here/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$source_dir"
  fi
  mkdir -p "$out"
  for library in "$bins"/libggml-cpu-*.so; do ln -sf "$library" "$out/"; done
  if [ ${#extra[@]} -gt 0 ]; then
    printf '%s\n' '#include "log.h"' \
      '__attribute__((destructor)) static void log_flush_at_exit() { common_log_pause(common_log_main()); }' \
      > "$out/log-flush-at-exit.cpp"
  fi
  local sources=()
  for source in "$@"; do
    case "$source" in
      /*) sources+=("$source") ;; # a source of our own (tools/llamacpp)
      *) sources+=("$source_dir/$source") ;;
    esac
  done
  # shellcheck disable=SC2086 # FLAGS is a list of compiler options
  g++ -std=c++17 $flags -pthread \
    -I"$source_dir/common" -I"$source_dir/include" -I"$source_dir/ggml/include" \
    "${sources[@]}" "${extra[@]}" -o "$out/$name" \
    -L"$bins" -l:libllama-common.so -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
    -Wl,-rpath,"$bins"
  echo "$out/$name"
}
