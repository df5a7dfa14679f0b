#!/usr/bin/env bash
# Rebuilds memra's demo model from scratch (about an hour on 2 cores), see MODEL_CARD.md:
#   apt-get install fortunes dict-jargon dict-devil wordnet-base python3-torch python3-numpy libopenblas0-pthread
#   bash tools/demo-model/build.sh [OUT_DIR]
# libopenblas0-pthread matters: Debian's torch otherwise runs on the reference BLAS (~20x slower).
# Steps: extract the corpus, train the BPE vocabulary and tokenize, train (seeded), export q8_0,
# then copy the run's records next to this script and the model into packages/cli/assets/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/out}"
mkdir -p "$out"
/usr/bin/python3 "$here/extract-corpus.py" "$out"
bun "$here/prepare-data.ts" "$out" --vocab 4096
/usr/bin/python3 "$here/train.py" "$out" --steps 800 --threads 2 --seed 1234 | tee "$out/train.log"
bun "$here/export.ts" "$out" "$root/packages/cli/assets/memra-demo-qwen3-q8_0.gguf" --type q8_0
cp "$out/loss.csv" "$out/train-config.json" "$out/corpus-stats.json" "$here/"
echo "done: packages/cli/assets/memra-demo-qwen3-q8_0.gguf; now record the goldens (see MODEL_CARD.md)"
