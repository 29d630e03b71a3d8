#!/usr/bin/env bash
# deploy/demo.sh — `make run`: synthesize a small gpt-oss-shaped model with RANDOM weights, start a
# loopback cluster of 2 expert nodes, generate 32 tokens through it, and print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
model=build/demo/gpt-oss-demo.vindex
if [ ! -f "$model/manifest.json" ]; then
  echo "== making the demo model (random weights: the tokens it generates mean nothing) =="
  mkdir -p build/demo
  bin/vindex synth --arch gpt-oss --layers 4 --hidden 1024 --heads 16 --kv-heads 4 --head-dim 64 \
    --experts 16 --top-k 4 --expert-ff 1024 --vocab 8192 --seed 42 --format vindex "$model.tmp"
  rm -rf "$model" && mv "$model.tmp" "$model"
fi
echo "== loopback cluster: 2 expert nodes on 127.0.0.1, 32 tokens =="
bin/coordinator generate --model "$model" --loopback 2 --tokens 1,2,3,4,5,6,7,8 --max-tokens 32
