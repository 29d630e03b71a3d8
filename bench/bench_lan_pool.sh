#!/usr/bin/env bash
# bench/bench_lan_pool.sh — several coordinators, one expert pool, on the emulated LAN
# (tests/lan/lan.sh; root): two coordinators decode S streams each at once against 4 shared nodes
# (expert-node --group-window-us W for each W given; 0: a node groups only what is queued
# together), then against two separate pools of 4 nodes. The second decodes other streams
# (bench_lan --first-stream S): other tokens, other experts, as another coordinator's requests. Per case each coordinator's bench_lan
# line, then one line: both coordinators' decode tok/s and their sum, the expert weight bytes the
# nodes read (their summaries; the prompt steps included) and per decoded token, and the nodes'
# group window counters (groups held for another coordinator's rows, requests that joined them,
# holds that gave up on one, seconds held in all).
#   bench/bench_lan_pool.sh [--model DIR] [--streams S] [--steps N] [--windows "0 20000 auto"]
# The model defaults to bench_lan.sh's K3-shaped synth (/tmp/mw-k3lan, made by it).
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -euo pipefail
cd "$(dirname "$0")/.."
M=/tmp/mw-k3lan S=16 steps=48 windows="0 20000 auto"
while [ $# -gt 0 ]; do
  case $1 in
    --model) M=$2 ;; --streams) S=$2 ;; --steps) steps=$2 ;; --windows) windows=$2 ;;
    *) echo "bench_lan_pool.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
if ! why=$(tests/lan/lan.sh check); then
  echo "bench_lan_pool.sh: skipped: the emulated LAN cannot run here: $why" >&2
  exit 0
fi
[ -f "$M/manifest.json" ] || { echo "bench_lan_pool.sh: no vindex at $M (bench/bench_lan.sh makes it)" >&2; exit 2; }
E=$(bin/vindex inspect "$M" | sed -n 's/.* \([0-9]*\) experts$/\1/p' | head -1)
layers=$(bin/vindex inspect "$M" | sed -n 's/^ *holds *\([0-9]*-[0-9]*\):.*/\1/p' | head -1)
specs=""
for ((k = 0; k < 4; k++)); do specs="$specs $layers:$((k * E / 4))-$(((k + 1) * E / 4 - 1))"; done
out=/tmp/bench_lan_pool.$$.jsonl
pair() { # LABEL NS0 WHO0 EPS0 NS1 WHO1 EPS1: both coordinators at once; their lines on stdout and in $out
  : >"$out"
  tests/lan/lan.sh exec "$2" "$3" build/rel/bench/bench_lan --model "$M" --nodes "$4" --streams "$S" \
    --micro 1 --steps "$steps" --rounds 1 --label "$1-a" 2>/dev/null | grep '"lan"' >>"$out" &
  local a=$!
  tests/lan/lan.sh exec "$5" "$6" build/rel/bench/bench_lan --model "$M" --nodes "$7" --streams "$S" \
    --micro 1 --steps "$steps" --rounds 1 --label "$1-b" --first-stream "$S" 2>/dev/null | grep '"lan"' >>"$out" &
  wait $a $!
  cat "$out"
}
# the case's line: CASE WINDOW READ_BYTES "SHARED RUN REQUESTS" ["HELD JOINED MISSED SECONDS"]
report() {
  jq -sc --arg case "$1" --arg w "$2" --argjson read "$3" --arg sh "$4" --arg hold "${5:-}" '
    (map(.tok_s)) as $t | ($t | add) as $sum | ($hold | split(" ") | map(tonumber)) as $h |
    ($sh | split(" ") | map(tonumber)) as $s |
    {bench: "lan_pool", case: $case, window_us: ($w | tonumber? // $w), tok_s: $sum, tok_s_each: $t,
     weight_bytes: $read, bytes_per_token: ($read / (2 * '"$S"' * '"$steps"') | floor),
     executions: $s[1], shared_executions: $s[0], requests_in_shared: $s[2]} +
    (if ($h | length) == 4 then {groups_held: $h[0], requests_joined: $h[1], holds_missed: $h[2],
      held_s: $h[3]} else {} end)' "$out"
}
reads() { cat /tmp/"$1".lan/node-*.log | sed -n 's/.*expert weights read \([0-9]*\) B.*/\1/p' | awk '{s += $1} END {printf "%.0f\n", s}'; }
held() {
  cat /tmp/"$1".lan/node-*.log |
    sed -n 's/.*rows: \([0-9]*\), requests that joined them: \([0-9]*\), holds that gave up on one: \([0-9]*\), held \([0-9.]*\) s.*/\1 \2 \3 \4/p' |
    awk '{h += $1; j += $2; m += $3; s += $4} END {printf "%d %d %d %.3f\n", h, j, m, s}'
}
# Stops NAME's N nodes gently and waits (10 s at most) for each one's exit summary, which holds
# what it read: lan.sh down would KILL a node still printing after half a second.
stop_nodes() {
  local k p t=0
  for ((k = 0; k < $2; k++)); do
    for p in $(ip netns pids "$1-n$k" 2>/dev/null); do
      [ "$(cat /proc/"$p"/comm 2>/dev/null)" = expert-node ] && kill -TERM "$p" 2>/dev/null
    done
  done
  while [ "$(cat /tmp/"$1".lan/node-*.log | grep -c 'expert weights read')" -lt "$2" ] && [ $t -lt 100 ]; do
    sleep 0.1; t=$((t + 1))
  done
  [ $t -lt 100 ] || echo "bench_lan_pool.sh: $1: not every node printed its summary: bytes read undercounted" >&2
}
# executions with several clients' rows, of all; the requests in them
shared() {
  cat /tmp/"$1".lan/node-*.log |
    sed -n "s/.*several clients' rows: \([0-9]*\) of \([0-9]*\), with \([0-9]*\) requests.*/\1 \2 \3/p" |
    awk '{s += $1; g += $2; r += $3} END {printf "%d %d %d\n", s, g, r}'
}
up() { tests/lan/lan.sh up "$@" --delay-ms 0.1 --model "$M" --specs "$specs" --owner $$ | sed -n 's/^nodes: //p'; }
echo "== bench_lan_pool.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for W in $windows; do
  n="mwpl$$w$W"
  eps=$(up "$n" --nodes 4 --coordinators 2 --extra "--group-window-us $W")
  pair "shared-w$W" "$n" c0 "$eps" "$n" c1 "$eps"
  stop_nodes "$n" 4
  MW_LAN_KEEP=1 tests/lan/lan.sh down "$n"
  h=""
  [ "$W" = 0 ] || h=$(held "$n")
  report shared "$W" "$(reads "$n")" "$(shared "$n")" "$h"
  rm -rf "/tmp/$n.lan"
done
a="mwpl$$a" b="mwpl$$b"
ea=$(up "$a" --nodes 4)
eb=$(up "$b" --nodes 4)
pair separate "$a" c0 "$ea" "$b" c0 "$eb"
stop_nodes "$a" 4
stop_nodes "$b" 4
MW_LAN_KEEP=1 tests/lan/lan.sh down "$a"
MW_LAN_KEEP=1 tests/lan/lan.sh down "$b"
sa=$(shared "$a") sb=$(shared "$b")
report separate 0 "$(( $(reads "$a") + $(reads "$b") ))" "0 $(( $(echo "$sa" | cut -d' ' -f2) + $(echo "$sb" | cut -d' ' -f2) )) 0"
rm -rf "/tmp/$a.lan" "/tmp/$b.lan" "$out"
