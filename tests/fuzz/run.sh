#!/usr/bin/env bash
# tests/fuzz/run.sh — runs libFuzzer harnesses, each for SECONDS, two at a time, and prints one
# line per harness (executions, corpus size, findings). Exit status 1 if any harness found a crash,
# a leak, a timeout or ran out of memory: its input is kept under build/fuzz/crashes/ and the
# line says how to replay it.
#   tests/fuzz/run.sh SECONDS build/fuzz/fuzz_NAME...
# Each harness reads its seeds from tests/fuzz/corpus/NAME/ (committed: small valid inputs and
# every crash found so far, as regression cases) and grows its working corpus in
# build/fuzz/corpus/NAME/ (kept between runs, never committed). tests/fuzz/NAME.dict, when present,
# is its dictionary. FUZZ_JOBS sets how many run at once (default 2).
set -uo pipefail
secs=${1:?usage: run.sh SECONDS HARNESS...}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-2}
mkdir -p "$root/build/fuzz/crashes" "$root/build/fuzz/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
  local bin=$1 name log corpus seeds dict=()
  if [ ! -x "$bin" ]; then echo "fuzz: $bin is not built"; return 1; fi
  name=$(basename "$bin"); name=${name#fuzz_}
  corpus="$root/build/fuzz/corpus/$name"; seeds="$root/tests/fuzz/corpus/$name"
  log="$root/build/fuzz/logs/$name.log"
  mkdir -p "$corpus" "$seeds"
  [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
  "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=1048576 \
    -print_final_stats=1 -artifact_prefix="$root/build/fuzz/crashes/$name-" "${dict[@]}" \
    "$corpus" "$seeds" >"$log" 2>&1
  local rc=$?
  local execs units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $name: ${execs:-?} executions in ${secs}s, corpus $units, no findings"
  else
    local art
    art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "fuzz $name: FOUND a fault after ${execs:-?} executions (exit $rc): ${art:-see $log}"
    grep -m3 -E "ERROR: |SUMMARY: |runtime error" "$log" | sed 's/^/    /'
    echo "    replay: $bin ${art:-INPUT}; once fixed, keep it: cp ${art:-INPUT} tests/fuzz/corpus/$name/"
    return 1
  fi
}

fail=0 pids=() running=0
for bin in "$@"; do
  [ -n "${MW_FUZZ_FILTER:-}" ] && [[ "$bin" != *"$MW_FUZZ_FILTER"* ]] && continue
  run_one "$bin" &
  pids+=($!)
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || fail=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || fail=1
  running=$((running - 1))
done
exit $fail
