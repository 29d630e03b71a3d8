#!/usr/bin/env bash
# bench/bench_lan.sh — bench_lan on the emulated LAN (tests/lan/lan.sh; root and network
# namespaces): a K3-shaped synth (kimi-k3: 896 experts, top-16, widths narrowed to fit one
# machine) on 8 nodes, each owning an even range of every MoE layer's experts, decoded by a
# coordinator in its own namespace at 0.1 ms / 10 Gbit/s, 0.5 ms / 1 Gbit/s and 1 ms / 1 Gbit/s,
# with and without ping-pong micro-batches; in process for reference; the union curve on the
# cluster once. Before each link's decode, in the same LAN, the parts of docs/scale.md's model are
# measured: the messaging stack's CPU per row (bench_rows, in process, before the links), the
# CPUs the coordinator and the nodes may run on (lan_colocation: the cores they share), the
# cores free to the fleet (delayline --cores) and the fan-out round trip to the 8
# nodes' echoes through the link (delayline --ping) with a message of one node's rows at each
# stream count, and with none of the delay line (the host's wake-ups alone). At the end
# bench/bench_lan_model.sh predicts every decode's step from those parts and prints predicted ÷
# measured. The link probe also takes the delay lines' CPU time (line_cpu_us a ping), each decode
# the CPU time of the nodes', the lines' and the coordinator's processes (node_cpu_us,
# line_cpu_us, coordinator_cpu_us a layer call), lan_colocation the nodes' compute threads
# (node_threads). After each link's decodes the one-row pings are taken again (labels
# .../1/after and .../1/after/direct: not the model's parts, a check on them). JSON lines on stdout
# (bench_lan's, rows_*, lan_link, lan_cores, lan_colocation, lan_predict), progress on stderr.
#   bench/bench_lan.sh [--model DIR] [--streams 1,16,64] [--steps N] [--rounds R] [--links "D/R ..."]
#                      [--split-cores CO/NODES]
# --split-cores 0/1 runs the nodes (and their delay lines) on CPU 1 and the coordinator's decode on
# CPU 0 (taskset): each side a core of its own, as split hosts would have; the probes and the model
# are not run then (their parts assume the shared cores).
# Without --model it synthesizes /tmp/mw-k3lan (8 layers, hidden 256, 4 heads of 32, q/kv latent 64,
# 896 experts of FF 128 in MXFP4, top-16, dense q8_0), the model of docs/benchmarks.md's table.
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -euo pipefail
cd "$(dirname "$0")/.."
model="" streams=1,16,64 steps=6 rounds=2 links="0.1/10gbit 0.5/1gbit 1/1gbit" nodes=8 split=""
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2 ;; --streams) streams=$2 ;; --steps) steps=$2 ;; --rounds) rounds=$2 ;;
    --links) links=$2 ;; --split-cores) split=$2 ;; *) echo "bench_lan.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
if ! why=$(tests/lan/lan.sh check); then
  echo "bench_lan.sh: skipped: the emulated LAN cannot run here: $why" >&2
  exit 0
fi
if [ -z "$model" ]; then
  model=/tmp/mw-k3lan
  [ -f $model/manifest.json ] || bin/vindex synth --arch kimi-k3 --layers 8 --hidden 256 --heads 4 \
    --head-dim 32 --experts 896 --top-k 16 --expert-ff 128 --vocab 1024 --seed 7 --q-lora 64 \
    --kv-lora 64 --rope-dim 16 --v-dim 32 --kda-head-dim 32 --dense-ff 256 --dense-format q8_0 \
    --format vindex $model >&2
fi
E=$(bin/vindex inspect "$model" | sed -n 's/.* \([0-9]*\) experts$/\1/p' | head -1)
hidden=$(bin/vindex inspect "$model" | sed -n 's/.*hidden \([0-9]*\),.*/\1/p' | head -1)
topk=$(bin/vindex inspect "$model" | sed -n 's/.*expert_used_count *\([0-9]*\)$/\1/p' | head -1)
layers=$(bin/vindex inspect "$model" | sed -n 's/^ *holds *\([0-9]*-[0-9]*\):.*/\1/p' | head -1)
specs=""
for ((k = 0; k < nodes; k++)); do specs="$specs $layers:$((k * E / nodes))-$(((k + 1) * E / nodes - 1))"; done
echo "== bench_lan.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
out=/tmp/bench_lan.$$.jsonl
j() { "$@" | tee -a "$out"; } # stdout, kept for the model at the end
# CPU time (ns) of every thread of the processes named (comma-separated pids): schedstat's first
cpu_ns() {
  local p
  for p in ${1//,/ }; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done | awk '{ s += $1 } END { printf "%.0f", s }'
}
j build/rel/bench/bench_lan --model "$model" --local --streams "$streams" --micro 1 --steps "$steps" \
  --rounds "$rounds" --label in-process
# the messaging stack's CPU per row on these cores (the model's rho): in-process nodes run as the
# LAN's do (a thread per CPU, the default idle poll) behind the relay, over loopback
[ -n "$split" ] || j build/rel/bench/bench_rows --model "$model" --rows "1,$(echo "$streams" | tr , '\n' | sort -n | tail -1)" \
  --nodes $nodes --node-threads "$(nproc)" --node-poll-us -1 --transport relay --calls 200 --seconds 0.05 \
  2> >(grep -v '^expert-node' >&2)
first=1
for link in $links; do
  d=${link%/*} r=${link#*/} name="mwbl$$"
  ${split:+taskset -c "${split#*/}"} tests/lan/lan.sh up "$name" --nodes $nodes --delay-ms "$d" --rate "$r" --model "$model" \
    --specs "$specs" --owner $$ >"/tmp/$name.up" 2>&1 || { cat "/tmp/$name.up" >&2; exit 1; }
  eps=$(sed -n 's/^nodes: //p' "/tmp/$name.up")
  probe=$(sed -n 's/^probe_link: //p' "/tmp/$name.up" | sed 's|tcp://||g')
  direct=$(sed -n 's/^probe_direct: //p' "/tmp/$name.up" | sed 's|tcp://||g')
  head -1 "/tmp/$name.up" >&2
  dl=build/rel/tests/lan/delayline label="lan-${d}ms-$r${split:+-split}"
  # the co-location the model's ping-pong term reads: the CPUs the coordinator's decode may run
  # on (as it is started below) and those of every process in the nodes' namespaces
  ccpus=$(${split:+taskset -c "${split%/*}"} tests/lan/lan.sh exec "$name" c0 \
    sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  ipc=$(command -v ip || echo /usr/sbin/ip)
  ncpus=$(for ((k = 0; k < nodes; k++)); do
    for p in $("$ipc" netns pids "$name-n$k"); do
      sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null || true
    done
  done | sort -u | paste -sd, -)
  [ -n "$ncpus" ] || echo "bench_lan.sh: no process in the nodes' namespaces: no lan_colocation" >&2
  # the nodes' and the delay lines' processes (not the echoes), whose CPU time is taken over the
  # pings and the decodes; a node runs a compute thread per online CPU (expert-node's default)
  npids="" lpids=""
  for ((k = 0; k < nodes; k++)); do
    for p in $("$ipc" netns pids "$name-n$k"); do
      cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) || continue
      case $cmd in
        *expert-node*) npids="$npids,$p" ;;
        *delayline*--to*) lpids="$lpids,$p" ;;
      esac
    done
  done
  npids=${npids#,} lpids=${lpids#,}
  nthreads=$(tests/lan/lan.sh exec "$name" n0 getconf _NPROCESSORS_ONLN)
  [ -z "$ncpus" ] || j awk -v l="$label" -v c="$ccpus" -v n="$ncpus" -v t="$nthreads" 'function set(s, a,   i, k, r, m) {
      m = split(s, r, ","); for (i = 1; i <= m; i++) { split(r[i], k, "-"); if (k[2] == "") k[2] = k[1]
        for (j = k[1]; j <= k[2]; j++) a[j] = 1 } }
    BEGIN { nt = t; set(c, C); set(n, M); t = 0; h = 0; for (x in C) { t++; if (x in M) h++ }
      printf "{\"bench\":\"lan_colocation\",\"label\":\"%s\",\"coordinator_cpus\":\"%s\",\"node_cpus\":\"%s\",\"shared\":%.3g,\"node_threads\":%d}\n", l, c, n, t ? h / t : 0, nt }'
  for p in $([ -n "$split" ] || echo 2 $((nodes * 2 + 1))); do
    j tests/lan/lan.sh exec "$name" c0 $dl --cores 500 --procs $p --label "$label"
  done
  # one node's rows of an S-row step (and of a micro-batch's S/2): a row goes to a node once,
  # however many of its k experts the node holds, so S·(1 − (1 − 1/N)^k) rows of hidden f16 values
  for S in $([ -n "$split" ] || for s in ${streams//,/ }; do echo $s $((s / 2)); done | tr ' ' '\n' | sort -nu | grep -v '^0$'); do
    bytes=$(awk -v s=$S -v n=$nodes -v k=$topk -v h=$hidden \
      'BEGIN { r = s * (1 - (1 - 1 / n) ^ k); r = r < 1 ? 1 : int(r + 0.5); print r * h * 2 }')
    l0=$(cpu_ns "$lpids")
    ping=$(tests/lan/lan.sh exec "$name" c0 $dl --ping "$probe" --bytes $bytes --count 100 --label "$label/$S")
    j jq -c --argjson c "$(($(cpu_ns "$lpids") - l0))" '. + {line_cpu_us: ($c / .count / 1000 | round)}' <<<"$ping"
    j tests/lan/lan.sh exec "$name" c0 $dl --ping "$direct" --bytes $bytes --count 100 \
      --label "$label/$S/direct"
  done
  union=()
  [ $first = 1 ] && [ -z "$split" ] && union=(--union 256)
  j ${split:+taskset -c "${split%/*}"} tests/lan/lan.sh exec "$name" c0 build/rel/bench/bench_lan --model "$model" --nodes "$eps" \
    --streams "$streams" --micro 1,2 --steps "$steps" --rounds "$rounds" --label "$label" \
    ${npids:+--node-pids "$npids"} ${lpids:+--line-pids "$lpids"} "${union[@]}" \
    2> >(grep -v '^expert-node\|^coordinator: fingerprinting' >&2) || true
  # the one-row ping again, through the link and straight: a link or host that changed during
  # the decodes shows here (the model takes the pings before them)
  if [ -z "$split" ]; then
    j tests/lan/lan.sh exec "$name" c0 $dl --ping "$probe" --bytes $((hidden * 2)) --count 100 \
      --label "$label/1/after"
    j tests/lan/lan.sh exec "$name" c0 $dl --ping "$direct" --bytes $((hidden * 2)) --count 100 \
      --label "$label/1/after/direct"
  fi
  for p in $([ -n "$split" ] || echo 2 $((nodes * 2 + 1))); do
    j tests/lan/lan.sh exec "$name" c0 $dl --cores 500 --procs $p --label "$label"
  done
  tests/lan/lan.sh down "$name"
  rm -f "/tmp/$name.up"
  first=0
done
[ -n "$split" ] || bench/bench_lan_model.sh --nodes $nodes <"$out"
rm -f "$out"
