#!/usr/bin/env bash
# bench/bench_lan_pool.sh — several coordinators, one expert pool, on the emulated LAN
# (tests/lan/lan.sh; root): two coordinators decode S streams each at once against 4 shared nodes
# (expert-node --group-window-us W for each W given), then against two separate pools of 4 nodes.
# Per case each coordinator's bench_lan line and the nodes' expert weight bytes read (from their
# summaries), and how many rounds a node held open for the other coordinator's layer.
#   bench/bench_lan_pool.sh [--model DIR] [--streams S] [--steps N] [--windows "0 3000"]
# The model defaults to bench_lan.sh's K3-shaped synth (/tmp/mw-k3lan, made by it).
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -euo pipefail
cd "$(dirname "$0")/.."
M=/tmp/mw-k3lan S=16 steps=6 windows="0 3000"
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
pair() { # LABEL NS0 WHO0 EPS0 NS1 WHO1 EPS1: both coordinators at once
  tests/lan/lan.sh exec "$2" "$3" build/rel/bench/bench_lan --model "$M" --nodes "$4" --streams "$S" \
    --micro 1 --steps "$steps" --rounds 1 --label "$1-a" 2>/dev/null | grep '"lan"' &
  local a=$!
  tests/lan/lan.sh exec "$5" "$6" build/rel/bench/bench_lan --model "$M" --nodes "$7" --streams "$S" \
    --micro 1 --steps "$steps" --rounds 1 --label "$1-b" 2>/dev/null | grep '"lan"' &
  wait $a $!
}
reads() { cat /tmp/"$1".lan/node-*.log | sed -n 's/.*expert weights read \([0-9]*\) B.*/\1/p' | awk '{s += $1} END {print s + 0}'; }
held() { cat /tmp/"$1".lan/node-*.log | sed -n 's/.*layer: \([0-9]*\), requests that joined them: \([0-9]*\)/\1 \2/p' | awk '{h += $1; j += $2} END {print h + 0, j + 0}'; }
up() { tests/lan/lan.sh up "$@" --delay-ms 0.1 --model "$M" --specs "$specs" --owner $$ | sed -n 's/^nodes: //p'; }
for W in $windows; do
  n="mwpl$$w$W"
  eps=$(up "$n" --nodes 4 --coordinators 2 --extra "--group-window-us $W")
  pair "shared-w$W" "$n" c0 "$eps" "$n" c1 "$eps"
  MW_LAN_KEEP=1 tests/lan/lan.sh down "$n"
  h=$(held "$n")
  echo "{\"bench\":\"lan_pool\",\"case\":\"shared\",\"window_us\":$W,\"weight_bytes\":$(reads "$n"),\"rounds_held\":${h% *},\"requests_joined\":${h#* }}"
  rm -rf "/tmp/$n.lan"
done
a="mwpl$$a" b="mwpl$$b"
ea=$(up "$a" --nodes 4)
eb=$(up "$b" --nodes 4)
pair separate "$a" c0 "$ea" "$b" c0 "$eb"
MW_LAN_KEEP=1 tests/lan/lan.sh down "$a"
MW_LAN_KEEP=1 tests/lan/lan.sh down "$b"
echo "{\"bench\":\"lan_pool\",\"case\":\"separate\",\"window_us\":0,\"weight_bytes\":$(( $(reads "$a") + $(reads "$b") ))}"
rm -rf "/tmp/$a.lan" "/tmp/$b.lan"
