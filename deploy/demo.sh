#!/usr/bin/env bash
# deploy/demo.sh — `make demo` / `make run`: synthesize a small gpt-oss-shaped model with RANDOM
# weights, start a loopback cluster of 2 expert nodes, generate 32 tokens of text from a text
# prompt through it, and print the text and the report. The weights are random, so the text is
# too. With --serve (`make run`) it then serves the model on 127.0.0.1:8080 (OpenAI API, loopback
# nodes) until Ctrl-C, printing a curl line to try.
#
# The shape (hidden = expert ff = 1536, 16 experts top-4, MXFP4 experts, Q8_0 dense, f16 wire) is
# chosen so that the movement ratio — wire bytes per token over expert weight bytes read per
# token — lands in moewire's target band of 1e-3 to 1e-4 (≈ 9e-4 here; real models are wider and
# land lower), while the model stays ≈ 280 MB and is made in well under a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
model=build/demo/gpt-oss-demo-1536.vindex
# (a demo model from before vindexes carried their tokenizer is made again)
if [ ! -f "$model/manifest.json" ] || [ ! -f "$model/tokenizer.gguf" ]; then
  echo "== making the demo model (random weights: the tokens it generates mean nothing) =="
  mkdir -p build/demo
  rm -rf "$model.tmp"
  bin/vindex synth --arch gpt-oss --layers 4 --hidden 1536 --heads 24 --kv-heads 4 --head-dim 64 \
    --experts 16 --top-k 4 --expert-ff 1536 --vocab 8192 --dense-format q8_0 --seed 42 \
    --format vindex "$model.tmp"
  rm -rf "$model" && mv "$model.tmp" "$model"
fi
echo "== loopback cluster: 2 expert nodes on 127.0.0.1, 32 tokens, f16 activations on the wire =="
echo "== the weights are RANDOM, so the text below is random bytes-and-pieces, not language =="
echo "prompt: The quick brown fox"
printf 'text:   '
bin/coordinator generate --model "$model" --loopback 2 --wire f16 --prompt "The quick brown fox" \
  --max-tokens 32
echo "== the movement ratio above is wire bytes per token / expert weight bytes read per token;"
echo "   moewire's target band is 1e-3 to 1e-4 (see docs/benchmarks.md)"
[ "${1:-}" = "--serve" ] || exit 0
listen=${MOEWIRE_LISTEN:-127.0.0.1:8080}
echo "== serving the demo model on http://$listen (2 loopback expert nodes); Ctrl-C stops it =="
echo "   try (the weights are random, so is the text):"
echo "   curl -s http://$listen/v1/completions -H 'Content-Type: application/json' \\"
echo "     -d '{\"model\": \"gpt-oss-demo-1536\", \"prompt\": \"Hello\", \"max_tokens\": 16}'"
echo "   and http://$listen/metrics, http://$listen/health, http://$listen/v1/models"
exec bin/coordinator serve --model "$model" --loopback 2 --wire f16 --listen "$listen"
