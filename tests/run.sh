#!/usr/bin/env bash
# tests/run.sh — runs the test binaries given as arguments (cmocka programs), each under a
# timeout, and ends with one summary in cmocka's format. Exit status 1 if anything failed.
# Each binary runs with a mark of its own in its environment (MW_TEST_RUN), which every process it
# starts inherits: whatever still carries the mark when the binary has ended (servers and nodes in
# process groups of their own, which a binary killed at its timeout could not stop, or that a test
# forgot) is killed then, so no run leaves processes behind.
#   MW_TEST_TIMEOUT  seconds per binary (default 900)
#   MW_TEST_FILTER   run only binaries whose path contains this string
#   MW_TEST_WRAP     a command (words split on spaces) each binary runs under, e.g. qemu-aarch64
set -uo pipefail
timeout_s=${MW_TEST_TIMEOUT:-900}
total_pass=0 total_fail=0 total_skip=0 bins=0
failed_bins=()
start=$(date +%s)
# The processes whose environment holds MW_TEST_RUN=$1, killed; prints how many there were.
reap_marked() {
  local n=0 e p
  for e in $(grep -lzx "MW_TEST_RUN=$1" /proc/[0-9]*/environ 2>/dev/null); do
    p=${e#/proc/}
    p=${p%/environ}
    kill -KILL "$p" 2>/dev/null && n=$((n + 1))
  done
  echo "$n"
}
read -r -a wrap <<<"${MW_TEST_WRAP:-}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for bin in "$@"; do
  [ -n "${MW_TEST_FILTER:-}" ] && [[ "$bin" != *"$MW_TEST_FILTER"* ]] && continue
  bins=$((bins + 1))
  log=$(mktemp)
  t0=$(date +%s)
  mark="$$-$bins-$RANDOM"
  MW_TEST_RUN=$mark timeout --signal=KILL "$timeout_s" "${wrap[@]}" "$bin" >"$log" 2>&1
  rc=$?
  left=$(reap_marked "$mark")
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  rm -f "$log"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # a crash or a timeout counts as a failure
  [ "$rc" -eq 137 ] && echo "[  ERROR   ] $bin killed after ${timeout_s}s"
  [ "$left" -gt 0 ] && echo "[  ERROR   ] $bin left $left process(es) running: killed"
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + s))
  [ "$rc" -ne 0 ] && failed_bins+=("$bin")
  echo "--- $(basename "$bin"): exit $rc in $(( $(date +%s) - t0 ))s"
done
echo
echo "[==========] moewire: $bins test program(s), $((total_pass + total_fail)) test(s) in $(( $(date +%s) - start ))s."
echo "[  PASSED  ] $total_pass test(s)."
[ "$total_skip" -gt 0 ] && echo "[  SKIPPED ] $total_skip test(s)."
if [ "${#failed_bins[@]}" -gt 0 ] || [ "$total_fail" -gt 0 ]; then
  echo "[  FAILED  ] $total_fail test(s), in: ${failed_bins[*]}"
  exit 1
fi
exit 0
