#!/usr/bin/env bash
# bench/serve_vs_llamacpp.sh — the serving benchmark side by side: starts `coordinator serve` on a
# GGUF in process and over a 2-node loopback cluster, each on a free port, and (when LLAMA_SERVER
# names its binary) for each level llama.cpp's llama-server on the same file and threads configured
# as its users run it for that many streams: `-np` slots equal to the streams, each with MW_CTX
# positions (`-c` streams x MW_CTX), flash attention on, continuous batching (its default), `-t` and
# `-tb` the threads, and each slot's KV cache of its own (`--no-kv-unified`, b10573's choice when
# `-np` is given). One cache shared by every slot (`--kv-unified`, its choice when the slot count
# is left on auto) makes a lone stream's steps pay for the whole shared cache, which measures the
# configuration and not the engine (docs/serving.md, llama-server beside ours). Then, level by level, runs
# bench/bench_serve.mjs against all of them in turns (the order alternating from level to level,
# the whole sweep MW_PASSES times) and (when LLAMA_BATCHED_BENCH names it)
# llama-batched-bench with the same prompt and generated lengths and sequences, stops
# the servers and prints the table: per level and target the aggregate tok/s (median and range
# over the passes), TTFT and ITL p50 / p99, the aggregate over one stream's, and over
# llama-server's in the same pass. The JSON lines go to stdout as they come; the table follows,
# and with LLAMA_BATCHED_BENCH a second one against llama-batched-bench's decode rate (S_TG).
# Every request of the sweep has a prompt of its own (--salt per level and pass), so no server can
# answer one from a prompt it cached for an earlier pass or level.
#   bench/serve_vs_llamacpp.sh MODEL.gguf [--streams 1,4,16,64] [other bench_serve.mjs options]
#   env: LLAMA_SERVER, LLAMA_BATCHED_BENCH (paths), MW_THREADS (default 2), MW_SLOTS (moewire's
#        --max-seqs, default 64),
#        MW_CTX (positions per sequence, default 256), MW_CONFIGS (default "inproc loopback2"),
#        MW_PROMPT (default 128), MW_GEN (default 32), MW_PASSES (default 1), MW_OUT (keep the
#        JSON lines in this file)
# Every request carries the logit_bias of bench_serve.mjs --text-only (tens of thousands of
# entries: the coordinator is started with --max-logit-bias to take them): on a random-weight model
# only tokens that are valid UTF-8 text on their own are generated, on every server alike
# (llama-server parses its replies and answers 500 to invalid UTF-8); every request must generate
# all MW_GEN tokens (EOS ignored), else the run stops.
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/serve_vs_llamacpp.sh MODEL.gguf [bench_serve.mjs options] (--help)" >&2; exit 2; }
model=$1
shift
threads=${MW_THREADS:-2} slots=${MW_SLOTS:-64} ctx=${MW_CTX:-256} passes=${MW_PASSES:-1}
. bench/serve_lib.sh
serve_setup
targets=()
for cfg in ${MW_CONFIGS:-inproc loopback2}; do
  extra=()
  case $cfg in
  inproc) extra=(--pin) ;;
  # the nodes compute on the same 2 cores as the coordinator: a loaded step can starve their
  # heartbeat answers past the default --down-ms, which a benchmark must not read as a failure
  loopback2) extra=(--loopback 2 --wire f16 --down-ms 10000 --pin) ;;
  *) echo "unknown MW_CONFIGS entry $cfg" >&2; exit 2 ;;
  esac
  bin/coordinator serve --model "$model" --listen 127.0.0.1:0 --ready-file "$dir/$cfg.ready" \
    --threads "$threads" --max-seqs "$slots" --ctx "$ctx" --max-queue 1024 \
    --max-logit-bias 65536 "${extra[@]}" \
    >"$dir/$cfg.log" 2>&1 &
  pids+=($!)
  url=$(wait_ready "$dir/$cfg.ready" $! "$dir/$cfg.log")
  targets+=(--target "moewire-$cfg=$url")
done
lpid=
llama_start() { # llama-server for $1 streams; sets ltarget
  ltarget=()
  [ -n "${LLAMA_SERVER:-}" ] || return 0
  local port
  port=$(free_port)
  # -c is shared by the -np slots: ctx positions each, as moewire's --ctx
  "$LLAMA_SERVER" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" \
    -np "$1" -c $(($1 * ctx)) --no-kv-unified -fa on --no-webui --no-jinja --reasoning-format none \
    >"$dir/llama.log" 2>&1 &
  lpid=$!
  pids+=("$lpid")
  wait_health "$port" "$lpid" "$dir/llama.log"
  ltarget=(--target "llama.cpp=http://127.0.0.1:$port")
}
llama_stop() {
  [ -n "$lpid" ] || return 0
  kill "$lpid" 2>/dev/null || true
  wait "$lpid" 2>/dev/null || true
  lpid=
}
[ -z "${LLAMA_SERVER:-}" ] || echo "llama-server: $("$LLAMA_SERVER" --version 2>&1 | grep -m1 version || true)" >&2
streams=1,4,16,64
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = --streams ]; then streams=$2; shift 2; else args+=("$1"); shift; fi
done
prompt=${MW_PROMPT:-128} gen=${MW_GEN:-32}
batched() { # one llama-batched-bench level, as a bench_serve-like JSON line
  "$LLAMA_BATCHED_BENCH" -m "$model" -npp "$prompt" -ntg "$gen" -npl "$1" -t "$threads" -fa on \
    -c $(((prompt + gen) * $1 + 64)) --output-format jsonl 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const l of s.split("\n")){
      if(!l.startsWith("{"))continue;const j=JSON.parse(l);console.log(JSON.stringify({
      target:"llama-batched-bench",streams:j.pl,prompt_tokens:j.pp,max_tokens:j.tg,
      tok_per_s:+j.speed_tg.toFixed(2),decode_tok_per_s:+j.speed_tg.toFixed(2),prefill_tok_per_s:+j.speed_pp.toFixed(2),wall_s:j.t}))}})'
}
i=0
for _ in $(seq 1 "$passes"); do
  for n in ${streams//,/ }; do
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ] && [ $((i % 2)) -eq 1 ]; then batched "$n" | tee -a "$out"; fi
    llama_start "$n"
    node bench/bench_serve.mjs "${targets[@]}" ${ltarget[@]+"${ltarget[@]}"} --vocab 32000 --prompt-tokens "$prompt" \
      --max-tokens "$gen" --streams "$n" --warmup $((i == 0)) --salt "$((i + 1))" --text-only "$model" $([ $((i % 2)) -eq 1 ] && echo --reverse) \
      ${args[@]+"${args[@]}"} | tee -a "$out"
    llama_stop
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ] && [ $((i % 2)) -eq 0 ]; then batched "$n" | tee -a "$out"; fi
    i=$((i + 1))
  done
done
echo
node bench/bench_serve.mjs --table "$out"
if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then # the engine's own rate: decode over its S_TG
  echo
  node bench/bench_serve.mjs --table "$out" --base llama-batched-bench
fi
