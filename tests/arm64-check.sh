#!/usr/bin/env bash
# tests/arm64-check.sh — the whole expert node on aarch64, checked here (`make arm64-check`;
# `make test` runs it): the tree cross-built with Debian's aarch64-linux-gnu-gcc against a private
# sysroot of Debian's arm64 libraries (tests/arm64/sysroot.sh, build/arm64/root), then
#  1. the node's unit tests (kernels, wire, serve loop, expert executor, the trunk's ops; the
#     Makefile's A64_UNIT) run under qemu-aarch64, each under a timeout (tests/run.sh);
#  2. tests/arm64/test_arm64_node.c (an x86 program): the aarch64 expert-node under qemu serving
#     the x86 coordinator over 127.0.0.1, exact mode bit-identical to in-process experts.
# Prints a SKIPPED line and succeeds when the cross compiler, qemu or the arm64 packages are
# missing (deploy/deps.sh installs and enables them). Nothing here can hang: every run is under
# `timeout` (ARM64_TIMEOUT seconds per test program, default 600).
# MW_BIN: the x86 programs the integration test starts (its coordinator and x86 node).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
CC=${A64_CC:-aarch64-linux-gnu-gcc}
QEMU=${NEON_QEMU:-qemu-aarch64}
JOBS=${ARM64_JOBS:-2}
skip() {
  echo "[  SKIPPED ] arm64-check: $*"
  exit 0
}
missing=()
command -v "$CC" >/dev/null 2>&1 || missing+=("$CC")
command -v "$QEMU" >/dev/null 2>&1 || missing+=("$QEMU")
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || missing+=("libc6-dev-arm64-cross")
[ "${#missing[@]}" -gt 0 ] && skip "missing ${missing[*]} (deploy/deps.sh installs them)"

t0=$(date +%s)
node_cmd=build/arm64/qemu-expert-node
rm -f "$node_cmd"
why=$(timeout 900 tests/arm64/sysroot.sh 2>&1 >/dev/null)
case $? in
0) ;;
2) skip "no arm64 sysroot: $why" ;;
*) echo "[  FAILED  ] arm64-check: building the arm64 sysroot failed: $why"; exit 1 ;;
esac
root=$PWD/build/arm64/root
log=build/arm64/build.log
if ! timeout 1800 make -s -j"$JOBS" arm64-bins A64_CC="$CC" >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "[  FAILED  ] arm64-check: the aarch64 build failed (all of it in $log)"
  exit 1
fi
echo "== arm64-check: sysroot and aarch64 build in $(( $(date +%s) - t0 ))s"
# The node as a program the integration test can start like any other: qemu runs it with the
# sysroot as its root, so its loader and libraries are the sysroot's, never the host's.
printf '#!/bin/sh\n# written by tests/arm64-check.sh\nexec %s -L %s %s "$@"\n' \
  "$QEMU" "$root" "$PWD/build/arm64/bin/expert-node" >"$node_cmd"
chmod +x "$node_cmd"

units=()
for t in $(make -s --no-print-directory -f Makefile print-arm64-tests 2>/dev/null); do units+=("$t"); done
[ "${#units[@]}" -gt 0 ] || { echo "[  FAILED  ] arm64-check: no aarch64 tests listed"; exit 1; }
status=0
MW_TEST_TIMEOUT=${ARM64_TIMEOUT:-600} MW_TEST_WRAP="$QEMU -L $root" tests/run.sh "${units[@]}" ||
  status=1
integ=build/asan/tests/arm64/test_arm64_node
if [ -x "$integ" ]; then
  MW_TEST_TIMEOUT=${ARM64_TIMEOUT:-600} MW_ARM64_NODE=$PWD/$node_cmd tests/run.sh "$integ" ||
    status=1
else
  echo "[  FAILED  ] arm64-check: $integ is not built (make $integ)"
  status=1
fi
echo "--- arm64-check: exit $status in $(( $(date +%s) - t0 ))s"
exit $status
