#!/usr/bin/env bash
# bench/turn2_vs_llamacpp.sh — a conversation's second turn, with and without a prompt cache:
# starts `coordinator serve` on a GGUF twice (its prompt cache on, and --cache-mb 0) and, when
# LLAMA_SERVER names its binary, llama.cpp's llama-server on the same file with the same threads
# and one slot, asked with cache_prompt true and false (two targets of one server); then runs
# bench/bench_serve.mjs --turn2 against all of them in turns (the order alternating from round to
# round): per round and target a fresh prompt of MW_PROMPT tokens, then that prompt followed by
# MW_NEW more, both streamed, and prints the table of turn-2 time to first token (median and range
# over the rounds), turn 1's, their ratio, and the ratio over the uncached moewire's turn 2.
#   bench/turn2_vs_llamacpp.sh MODEL.gguf
#   env: LLAMA_SERVER (path), MW_THREADS (default 2), MW_PROMPT (default 2000), MW_NEW (default
#        64), MW_ROUNDS (default 5), MW_WARMUP (requests per target before, default 1), MW_OUT
#        (keep the JSON lines in this file)
# Every request carries the logit_bias of bench_serve.mjs --text-only (llama-server answers 500 to
# the invalid UTF-8 a random-weight model writes) and generates one token (EOS ignored).
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/turn2_vs_llamacpp.sh MODEL.gguf (--help)" >&2; exit 2; }
model=$1
threads=${MW_THREADS:-2} prompt=${MW_PROMPT:-2000} new=${MW_NEW:-64} rounds=${MW_ROUNDS:-5}
ctx=$((prompt + new + 64))
. bench/serve_lib.sh
serve_setup
targets=() extra=()
for cfg in cache nocache; do
  mb=512
  [ $cfg = nocache ] && mb=0
  bin/coordinator serve --model "$model" --listen 127.0.0.1:0 --ready-file "$dir/$cfg.ready" \
    --threads "$threads" --max-seqs 1 --ctx "$ctx" --cache-mb $mb --max-logit-bias 32000 --pin >"$dir/$cfg.log" 2>&1 &
  pids+=($!)
  targets+=(--target "moewire-$cfg=$(wait_ready "$dir/$cfg.ready" $! "$dir/$cfg.log")")
done
if [ -n "${LLAMA_SERVER:-}" ]; then
  port=$(free_port)
  "$LLAMA_SERVER" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
    -np 1 -c "$ctx" --no-webui --no-jinja --reasoning-format none >"$dir/llama.log" 2>&1 &
  pids+=($!)
  wait_health "$port" $! "$dir/llama.log"
  targets+=(--target "llama-cache=http://127.0.0.1:$port" --target "llama-nocache=http://127.0.0.1:$port")
  extra+=(--extra 'llama-cache={"cache_prompt":true}' --extra 'llama-nocache={"cache_prompt":false}')
  echo "llama-server: $("$LLAMA_SERVER" --version 2>&1 | grep -m1 version || true)" >&2
fi
node bench/bench_serve.mjs --turn2 "$new" "${targets[@]}" ${extra[@]+"${extra[@]}"} \
  --vocab 32000 --prompt-tokens "$prompt" --max-tokens 1 --rounds "$rounds" --warmup "${MW_WARMUP:-1}" \
  --text-only "$model" | tee -a "$out"
echo
node bench/bench_serve.mjs --table "$out" --base moewire-nocache
