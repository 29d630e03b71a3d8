#!/usr/bin/env bash
# bench/bench_lan_model.sh — docs/scale.md's fleet model on this host, checked: reads
# bench/bench_lan.sh's JSON lines (stdin) and predicts every LAN decode's step from measured parts,
# printing {"bench":"lan_predict",...} with predicted ÷ measured tok/s and layer round trip.
#   bench/bench_lan_model.sh [--nodes N] [--node-threads T] <run.jsonl
# The parts (µs per MoE layer), each measured on its own:
#   cores     the CPU time free to the fleet, in cores (delayline --cores, in that LAN)
#   link(S)   the delay line's added round trip: the fan-out ping to the nodes' echoes through the
#             link less the same ping straight to them, with one node's rows of an S-row step
#   ser(S)    the rate: the straight ping with S rows' bytes less the one with one row's
#   T         a node's compute threads (lan_colocation's node_threads: expert-node runs one per
#             online CPU; --node-threads for runs before that field)
#   wake      the messaging stack's own round trip: the unlinked (0 ms) LAN's one-stream layer call
#             less its nodes' work on the cores (t·N·node/cores, below), the faster of its two
#             one-stream decodes (they do the same work: one stream does not split); raw TCP's
#             wake-ups, the straight ping, are less
#   cores is the mean of the probes before and after the decode; bench_lan.sh probes with two
#   threads and with as many as the fleet has (nodes × 2 + 1); on a host others load, the share
#   a fleet gets lies between (its threads block on the wire, spinners never do), and the model
#   is run with each: cores_probe says which
#   C(S)      the coordinator's trunk per layer (the decode's own timing), node(S) a node's compute
#             per batch as the nodes report it: "unlinked" takes both from the 0 ms run (a
#             prediction of the linked runs from parts that never saw the link), "same run" from
#             the decode being predicted (a check of how the round trip composes)
# On this host the 8 nodes and the coordinator share the cores. A node's batch is taken to keep
# t = min(T, cores) threads on CPUs for node(S), so a layer's node work is t·N·node(S)/cores:
# with cores <= T, N·node(S), the nodes' batches back to back at their reported wall time
# (bench_rows' rho, the CPU per row of in-process nodes less a one-thread backend's, is not added
# again; the codec's own share is 1-2 µs a row, rows_codec). The decodes' node_cpu_us, the nodes' measured
# CPU a layer call, is less (the second thread has a core only part of the batch); counted
# instead it under-predicts W (docs/scale.md). The delay lines' own CPU (lan_link's
# line_cpu_us) is not added: a line forwards a node's rows before it computes and its reply
# after, while the node waits for it, and that time is in link(S), measured through the lines
# (added as work on the cores it over-predicted W: docs/scale.md). The coordinator's link sends
# the nodes' rows one node after another and a node computes as soon as its rows are in: the
# link and the cores are a pipeline, done at the later of the last node's rows plus its compute
# (ser + node: as on a fleet, where every node has its own cores) and the cores' whole share
# plus the first node's rows. The wake is work too (a chain of hand-offs between the stack's
# threads in 9 processes, one at a time).
#   W(S)  = wake + link(S) + max(ser(S) + node(S), t·N·node(S)/cores + ser(S)/N)
#   step  = L·(C(S) + W(S))
# Ping-pong: while micro-batch A's call is out, the coordinator runs B's trunk. On cores of its
# own (a node per host: shared = 0) that trunk overlaps A's whole round trip; on cores the nodes
# and the stack share with it (shared, the share of the coordinator's CPUs the nodes may run on,
# from the lan_colocation line; 1 without it, as bench_lan.sh runs every process on every CPU
# unless --split-cores) both lanes' trunks and both calls' node work, X₂ = t·N·node₂ each, share
# the free cores, and the last call's wake and link come after them (nothing is left to overlap
# them). A micro-batch's trunk is the unsplit decodes' C(s) at S/2 rows (a lane reads
# the dense weights again: one more C1):
#   C₂    = 2·C1 + Cr·(S − 2), C1 and Cr = (C(S) − C1)/(S − 1) from the one-batch decodes
#   W₂    = W(S/2) with node₂, a node's compute per batch of S/2 rows (the micro-batch run's)
#   step₂ = L·max(C₂/2 + W₂,  max(C₂, shared·((C₂ + 2·X₂)/cores + wake + link(S/2))),
#                 2·(W₂ − wake − link(S/2)))
# the lanes' chain (a lane's trunk, then its call), the shared cores and the nodes (both lanes'
# node work back to back). With shared = 0 it is the fleet model's step₂ (docs/scale.md).
set -euo pipefail
nodes=8 threads=null
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2 ;; --node-threads) threads=$2 ;;
    *) echo "bench_lan_model.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
jq -s -c --argjson N "$nodes" --argjson T "$threads" '
  def link_of: sub("/.*$"; "");
  map(select(.bench == "lan_cores") | .procs = (.procs // .cpus)) as $probes
  | ["two threads", "the fleet'"'"'s threads"][] as $probe
  | ($probes | map(select((.procs <= 2) == ($probe == "two threads"))) | group_by(.label)
     | map({(.[0].label): (map(.cores_free) | add / length)}) | add) as $cores
  | select($cores != null)
  | (map(select(.bench == "lan_link")) | map({(.label): .rtt_us_median}) | add) as $ping
  | (map(select(.bench == "lan_colocation")) | map({(.label): .shared}) | add // {}) as $shared
  | (map(select(.bench == "lan_colocation") | .node_threads) | max // $T) as $T
  | if $T == null then error("no lan_colocation.node_threads (and no --node-threads)") else . end
  | map(select(.bench == "lan" and (.label | startswith("lan-")))) as $runs
  | ($runs | map(select(.label | test("^lan-0ms-")))) as $zero
  | if ($zero | length) == 0 then error("no unlinked (0 ms) run to take the parts from") else . end
  | ($zero[0].label) as $z
  | def run($l; $s; $m): $runs | map(select(.label == $l and .streams == $s and .micro_batches == $m)) | .[0];
    def sz($l; $s): if $s < 1 then 1 elif $ping["\($l)/\($s)"] then $s else $s * 2 end;
    def link($l; $s): $ping["\($l)/\(sz($l; $s))"] - $ping["\($l)/\(sz($l; $s))/direct"];
    def ser($l; $s): $ping["\($l)/\(sz($l; $s))/direct"] - $ping["\($l)/1/direct"];
    if run($z; 1; 1) == null then
      error("no one-stream decode in the unlinked run: the wake and C1 are taken from it") else . end
  | ([run($z; 1; 1), run($z; 1; 2)] | map(select(.))
     | map(.layer_rtt_us - ([$T, $cores[$z]] | min) * $N * .node_compute_us / $cores[$z]) | min) as $wake
  | $runs[]
  | . as $r
  | ($r.label) as $l | ($r.streams) as $S | ($cores[$l]) as $c
  | ["unlinked", "same run"][] as $parts
  | (if $parts == "unlinked" then $z else $l end) as $src
  | (run($src; $S; 1)) as $p1 | (run($src; $S; 2)) as $p2
  | def W($s; $node): $wake + link($l; $s)
      + ([ser($l; $s) + $node, ([$T, $c] | min) * $N * $node / $c + ser($l; $s) / $N] | max);
    W($S; $p1.node_compute_us) as $W
  | (if $r.micro_batches == 1 or $S == 1 then
       {W: $W, C: $p1.trunk_us_per_layer, node: $p1.node_compute_us, terms: [],
        layer: ($p1.trunk_us_per_layer + $W)}
     else
       ($S / 2 | floor) as $h | W($h; $p2.node_compute_us) as $W2
       | (run($src; 1; 1).trunk_us_per_layer) as $C1
       | (2 * $C1 + ($p1.trunk_us_per_layer - $C1) / ($S - 1) * ($S - 2)) as $C2
       | ($shared[$l] // 1) as $sh
       | (([$T, $c] | min) * $N * $p2.node_compute_us) as $X2
       | [$C2 / 2 + $W2, ([$C2, $sh * (($C2 + 2 * $X2) / $c + $wake + link($l; $h))] | max),
          2 * ($W2 - $wake - link($l; $h))] as $t
       | {W: $W2, C: $C2, node: $p2.node_compute_us, terms: ($t | map(round)), layer: ($t | max),
          shared: $sh, trunk_measured: $p2.trunk_us_per_layer}
     end) as $m
  | ($r.moe_layers * $m.layer) as $step
  | {bench: "lan_predict", label: $l, parts: $parts, cores_probe: $probe, streams: $S,
     micro_batches: $r.micro_batches,
     cores: $c, node_threads: $T, wake_us: ($wake | round), link_us: (link($l; $S) | round),
     ser_us: (ser($l; $S) | round), trunk_us: ($m.C | round),
     trunk_us_measured: (($m.trunk_measured // $r.trunk_us_per_layer) | round), node_us: ($m.node | round),
     shared: $m.shared,
     W_us: ($m.W | round), max_terms_us: $m.terms, layer_rtt_us: $r.layer_rtt_us,
     step_us_predicted: ($step | round), step_us: $r.step_us,
     tok_s_predicted: ($S / $step * 1e6 * 10 | round / 10), tok_s: $r.tok_s,
     ratio: ($r.step_us / $step * 1000 | round / 1000),
     rtt_ratio: (if $r.micro_batches == 1 or $S == 1 then $m.W / $r.layer_rtt_us * 1000 | round / 1000
                 else null end)}
  | select(.parts == "same run" or .label != $z)'
