#!/usr/bin/env bash
# tests/lan/lan.sh — an emulated LAN on one machine: up to 8 expert nodes and 1–2 coordinators,
# each in a network namespace of its own, joined by a bridge (in a namespace too), every link
# with a delay and a rate. The test (tests/integration/test_lan.c), the benchmark
# (bench/bench_lan.sh) and `make lan` use it.
#
#   lan.sh check                  exit 0 when this machine can (root, ip netns, tc); else why not
#   lan.sh up NAME [opts]         namespaces, bridge, links; nodes started when --model is given
#   lan.sh down NAME              kill everything in NAME's namespaces, remove them (idempotent)
#   lan.sh exec NAME WHO CMD...   run CMD in namespace WHO (c0, c1, n0 .. n7)
#   lan.sh run [opts] [-- CMD...] up, run CMD in c0 (or wait for Ctrl-C), down on every exit path
# options:
#   --nodes N (1..8, default 8)  --coordinators C (1..2, default 1)
#   --delay-ms D   round trip a link adds between a coordinator and a node (default 0.1)
#   --rate R       each member's link rate, tc units (default 10gbit)
#   --model PATH   start the nodes on this model
#   --specs "S0 S1 .."  node k's --experts (default: all, each node a replica of the whole)
#   --serve 1      (run, without CMD) a `coordinator serve` in c0 on 10.77.0.1:8080
#   --bin DIR      where expert-node is (default bin/)   --port P   the nodes' port (default 5555)
#   --extra "ARGS" more expert-node arguments
#
# Addresses: coordinator i is 10.77.0.(1+i), node k 10.77.0.(11+k), on interface eth0 of its
# namespace. Every run has namespaces of its own (NAME is unique: the script's callers use their
# pid), so the same addresses serve parallel runs. The delay is netem's (half each way on every
# member's egress) when the kernel has sch_netem; otherwise a user-space delay line
# (tests/lan/delayline.c) in each node's namespace forwards the node's port with half the delay
# each way, and the rate is tbf's. `lan.sh up` prints which, and the nodes' endpoints.
#
# Probes for the fleet model (bench/bench_lan.sh): every node's namespace also has an echo
# (tests/lan/delayline.c --echo) on port+1 behind the same link as the node (the delay line when
# there is one), and one on port+2 straight on its LAN address; `up` prints both lists.
#
# MW_LAN_KEEP=1 keeps /tmp/NAME.lan (the nodes' logs, their summaries) after `down`.
# Cleanup: `up` starts a watcher outside the caller's process group that runs `down NAME` when the
# process given by --owner PID (default: the caller of lan.sh) ends, however it ends; `run` also
# traps EXIT, INT and TERM.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
IP=${IP:-$(command -v ip || echo /usr/sbin/ip)}
TC=${TC:-$(command -v tc || echo /usr/sbin/tc)}

die() { echo "lan.sh: $*" >&2; exit 1; }

ns_of() { echo "$1-$2"; } # NAME WHO

# Why this machine cannot run the LAN, or nothing.
why_not() {
  [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; return; }
  [ -x "$IP" ] || { echo "needs ip (iproute2)"; return; }
  [ -x "$TC" ] || { echo "needs tc (iproute2)"; return; }
  local t="mwchk$$"
  if ! "$IP" netns add "$t" 2>/dev/null; then echo "ip netns add fails here"; return; fi
  if ! "$IP" -n "$t" link add br0 type bridge 2>/dev/null ||
    ! "$IP" -n "$t" link add v0 type veth peer name v1 2>/dev/null; then
    "$IP" netns del "$t"; echo "no bridge or veth in this kernel"; return
  fi
  if ! "$TC" -n "$t" qdisc add dev v0 root tbf rate 1gbit burst 128kb latency 10ms 2>/dev/null &&
    ! "$TC" -n "$t" qdisc add dev v0 root netem rate 1gbit 2>/dev/null; then
    "$IP" netns del "$t"; echo "tc has neither tbf nor netem here"; return
  fi
  "$IP" netns del "$t"
}

have_netem() {
  local t="mwnetem$$" ok=1
  "$IP" netns add "$t" 2>/dev/null || return 1
  "$IP" -n "$t" link add v0 type veth peer name v1 2>/dev/null &&
    "$TC" -n "$t" qdisc add dev v0 root netem delay 1ms 2>/dev/null && ok=0
  "$IP" netns del "$t"
  return $ok
}

down() {
  local name=$1 n p
  # the watcher (unless this is it) has nothing left to watch for
  p=$(cat "/tmp/$name.lan/watcher" 2>/dev/null || true)
  [ -z "$p" ] || [ "$p" = $$ ] || kill "$p" 2>/dev/null || true
  # TERM first (a node prints its summary), KILL what is left a moment later
  local sig
  for sig in TERM KILL; do
    for n in $("$IP" netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(br|c[0-9]|n[0-9])$" || true); do
      for p in $("$IP" netns pids "$n" 2>/dev/null || true); do kill -$sig "$p" 2>/dev/null || true; done
    done
    [ $sig = TERM ] && [ -n "${p:-}" ] && sleep 0.5
  done
  for n in $("$IP" netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(br|c[0-9]|n[0-9])$" || true); do
    "$IP" netns del "$n" 2>/dev/null || true
  done
  [ -n "${MW_LAN_KEEP:-}" ] || rm -rf "/tmp/$name.lan"
}

# Bytes/s of a tc rate ("10gbit", "1gbit", "100mbit").
rate_bytes() {
  local r=$1 n u
  n=${r%%[a-zA-Z]*}; u=${r#"$n"}
  case $u in
    gbit) echo $((n * 125000000)) ;; mbit) echo $((n * 125000)) ;; kbit) echo $((n * 125)) ;;
    *) die "rate $r: use gbit, mbit or kbit" ;;
  esac
}

# Shapes member WHO's egress: netem (delay half the round trip, rate) or tbf (rate only).
shape() {
  local ns=$1 half_us=$2 rate=$3 netem=$4 burst
  if [ "$netem" = 1 ]; then
    "$TC" -n "$ns" qdisc add dev eth0 root netem delay "${half_us}us" rate "$rate" limit 100000
  else
    # tbf needs a bucket of at least one timer tick's worth at the rate (HZ may be 100)
    burst=$(( $(rate_bytes "$rate") / 100 ))
    [ "$burst" -lt 131072 ] && burst=131072
    "$TC" -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
  fi
}

member() { # NAME WHO ADDR: a namespace with eth0 on the bridge
  local name=$1 who=$2 addr=$3 ns
  ns=$(ns_of "$name" "$who")
  "$IP" netns add "$ns"
  "$IP" -n "$ns" link set lo up
  "$IP" -n "$(ns_of "$name" br)" link add "$who" type veth peer name eth0 netns "$ns"
  "$IP" -n "$(ns_of "$name" br)" link set "$who" master br0 up
  "$IP" -n "$ns" addr add "$addr/24" dev eth0
  "$IP" -n "$ns" link set eth0 up
}

# A watcher, out of the caller's process group and without the test runner's mark, that takes the
# LAN down when the owner process ends.
watch_owner() {
  local name=$1 owner=$2
  env -u MW_TEST_RUN setsid bash -c '
    while kill -0 '"$owner"' 2>/dev/null; do sleep 0.5; done
    exec "$0" down '"$name"'' "$here/lan.sh" </dev/null >/dev/null 2>&1 &
  echo $! >"/tmp/$name.lan/watcher"
}

up() {
  local name=$1; shift
  local nodes=8 coords=1 delay=0.1 rate=10gbit model="" specs="" bin="$root/bin" port=5555 extra=""
  local owner=$PPID
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) nodes=$2 ;; --coordinators) coords=$2 ;; --delay-ms) delay=$2 ;; --rate) rate=$2 ;;
      --model) model=$2 ;; --specs) specs=$2 ;; --serve) ;; --bin) bin=$2 ;; --port) port=$2 ;;
      --extra) extra=$2 ;; --owner) owner=$2 ;;
      *) die "unknown option $1" ;;
    esac
    shift 2
  done
  [[ "$nodes" =~ ^[1-8]$ ]] || die "--nodes: 1 to 8"
  [[ "$coords" =~ ^[12]$ ]] || die "--coordinators: 1 or 2"
  [[ "$name" =~ ^[a-zA-Z0-9]{1,20}$ ]] || die "NAME: up to 20 letters or digits"
  local why; why=$(why_not)
  [ -z "$why" ] || die "cannot build the LAN: $why"
  local half_us; half_us=$(awk -v d="$delay" 'BEGIN { printf "%d", d * 500 }')
  local netem=0; have_netem && netem=1
  [ $netem = 1 ] || [ "$half_us" = 0 ] || [ -x "$root/build/rel/tests/lan/delayline" ] ||
    die "no sch_netem here, and no delay line: make build/rel/tests/lan/delayline"
  mkdir -p "/tmp/$name.lan"
  watch_owner "$name" "$owner"
  "$IP" netns add "$(ns_of "$name" br)"
  "$IP" -n "$(ns_of "$name" br)" link add br0 type bridge
  "$IP" -n "$(ns_of "$name" br)" link set br0 up
  local i k eps=""
  for ((i = 0; i < coords; i++)); do
    member "$name" "c$i" "10.77.0.$((1 + i))"
    shape "$(ns_of "$name" "c$i")" "$half_us" "$rate" "$netem"
  done
  for ((k = 0; k < nodes; k++)); do
    member "$name" "n$k" "10.77.0.$((11 + k))"
    shape "$(ns_of "$name" "n$k")" "$half_us" "$rate" "$netem"
    eps="$eps${eps:+,}tcp://10.77.0.$((11 + k)):$port"
  done
  echo "lan: $nodes node(s), $coords coordinator(s), +${delay} ms round trip, $rate per link" \
    "($([ $netem = 1 ] && echo netem || { [ "$half_us" -gt 0 ] && echo "delay line + tbf: this kernel has no sch_netem" || echo "tbf"; }))"
  [ -n "$model" ] || { echo "nodes: $eps"; return 0; }
  for ((k = 0; k < nodes; k++)); do
    local ns spec bind insecure
    ns=$(ns_of "$name" "n$k")
    spec=all
    [ -z "$specs" ] || spec=$(echo $specs | awk -v k=$((k + 1)) '{print $k}')
    [ -n "$spec" ] || die "--specs names fewer than $nodes nodes"
    # on its LAN address without CURVE: the bridge is private to this run's namespaces
    bind="tcp://10.77.0.$((11 + k)):$port" insecure=--insecure
    local dl="$root/build/rel/tests/lan/delayline" lan_ip="10.77.0.$((11 + k))"
    if [ $netem = 0 ] && [ "$half_us" -gt 0 ]; then
      insecure=""
      bind="tcp://127.0.0.1:$port"
      "$IP" netns exec "$ns" "$dl" --listen "$lan_ip:$port" \
        --to "127.0.0.1:$port" --delay-us "$half_us" >"/tmp/$name.lan/delay-$k.log" 2>&1 &
      "$IP" netns exec "$ns" "$dl" --listen "$lan_ip:$((port + 1))" \
        --to "127.0.0.1:$((port + 1))" --delay-us "$half_us" >>"/tmp/$name.lan/delay-$k.log" 2>&1 &
      "$IP" netns exec "$ns" "$dl" --echo --listen "127.0.0.1:$((port + 1))" >/dev/null 2>&1 &
    elif [ -x "$dl" ]; then
      "$IP" netns exec "$ns" "$dl" --echo --listen "$lan_ip:$((port + 1))" >/dev/null 2>&1 &
    fi
    if [ -x "$dl" ]; then # (not `test && cmd &`: that subshell would hold `run`'s pipe open)
      "$IP" netns exec "$ns" "$dl" --echo --listen "$lan_ip:$((port + 2))" >/dev/null 2>&1 &
    fi
    rm -f "/tmp/$name.lan/ready-$k"
    # shellcheck disable=SC2086
    "$IP" netns exec "$ns" "$bin/expert-node" --vindex "$model" --experts "$spec" --bind "$bind" \
      --ready-file "/tmp/$name.lan/ready-$k" $insecure $extra >"/tmp/$name.lan/node-$k.log" 2>&1 &
  done
  for ((k = 0; k < nodes; k++)); do
    local t=0
    until [ -s "/tmp/$name.lan/ready-$k" ]; do
      t=$((t + 1))
      [ $t -lt 1200 ] || { cat "/tmp/$name.lan/node-$k.log" >&2; die "node $k did not start"; }
      sleep 0.1
    done
  done
  echo "probe_link: ${eps//:$port/:$((port + 1))}"
  echo "probe_direct: ${eps//:$port/:$((port + 2))}"
  echo "nodes: $eps"
}

run() {
  local name="mwlan$$" args=() cmd=() serve=0 model="" bin="$root/bin"
  while [ $# -gt 0 ]; do
    [ "$1" = -- ] && { shift; cmd=("$@"); break; }
    case $1 in --serve) serve=$2 ;; --model) model=$2 ;; --bin) bin=$2 ;; esac
    args+=("$1"); shift
  done
  trap "down $name" EXIT # expanded now: `name` is local, gone when the trap runs
  trap 'exit 130' INT TERM
  up "$name" --owner $$ "${args[@]}" | tee "/tmp/$name.out"
  local eps; eps=$(sed -n 's/^nodes: //p' "/tmp/$name.out")
  rm -f "/tmp/$name.out"
  export MW_LAN_NODES=$eps MW_LAN_NAME=$name
  if [ ${#cmd[@]} -gt 0 ]; then
    "$IP" netns exec "$(ns_of "$name" c0)" "${cmd[@]}"
    return
  fi
  echo "namespaces: $("$IP" netns list | awk '{print $1}' | grep "^$name-" | sort | tr '\n' ' ')"
  echo "a command on the coordinator's host:  sudo ip netns exec $name-c0 CMD"
  if [ "$serve" = 1 ] && [ -n "$model" ]; then
    "$IP" netns exec "$(ns_of "$name" c0)" "$bin/coordinator" serve --model "$model" \
      --nodes "$eps" --listen 10.77.0.1:8080 >"/tmp/$name.lan/serve.log" 2>&1 &
    local t=0
    until "$IP" netns exec "$(ns_of "$name" c0)" curl -sf -o /dev/null http://10.77.0.1:8080/health; do
      t=$((t + 1))
      [ $t -lt 600 ] || { cat "/tmp/$name.lan/serve.log" >&2; die "the coordinator did not start"; }
      sleep 0.2
    done
    echo "coordinator: http://10.77.0.1:8080 (log /tmp/$name.lan/serve.log); try:"
    echo "  sudo ip netns exec $name-c0 curl -s http://10.77.0.1:8080/v1/completions \\"
    echo "    -H 'Content-Type: application/json' -d '{\"prompt\": \"Hello\", \"max_tokens\": 16}'"
  fi
  echo "Ctrl-C tears the LAN down."
  while true; do sleep 1; done
}

cmd=${1:-}
shift || true
case $cmd in
  check) w=$(why_not); [ -z "$w" ] || { echo "$w"; exit 1; } ;;
  up) up "$@" ;;
  down) down "$1" ;;
  exec) n=$1 who=$2; shift 2; exec "$IP" netns exec "$(ns_of "$n" "$who")" "$@" ;;
  run) run "$@" ;;
  *) sed -n '2,30p' "$0"; exit 2 ;;
esac
