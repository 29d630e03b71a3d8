#!/usr/bin/env bash
# tests/neon-check.sh — the aarch64 check of the kernels: cross-builds util/mw_err.c,
# util/mw_time.c, util/mw_platform.c, kernels/ (with kernels/*_neon.c) and
# tests/neon/neon_selftest.c with Debian's aarch64-linux-gnu-gcc, then runs the self-test under
# qemu-aarch64. No aarch64 builds of other libraries are needed. Prints a SKIPPED line (and
# succeeds) when the cross compiler, its libc or qemu is missing.
# `make test` calls this first; `make neon-check` runs it alone. Objects are cached in build/neon.
set -uo pipefail
cd "$(dirname "$0")/.."
CC=${NEON_CC:-aarch64-linux-gnu-gcc}
QEMU=${NEON_QEMU:-qemu-aarch64}
SYSROOT=/usr/aarch64-linux-gnu
missing=()
command -v "$CC" >/dev/null 2>&1 || missing+=("$CC")
command -v "$QEMU" >/dev/null 2>&1 || missing+=("$QEMU")
[ -e "$SYSROOT/include/stdio.h" ] || missing+=("$SYSROOT (libc6-dev-arm64-cross)")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[  SKIPPED ] neon-check: missing ${missing[*]} (deploy/deps.sh installs them)"
  exit 0
fi

out=build/neon
mkdir -p "$out/obj"
CFLAGS=(-std=c11 -ffp-contract=off -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter
        -Wno-format-truncation -Wshadow -Wstrict-prototypes -O2 -g -I. -pthread)
NEON_FLAGS=(-march=armv8.2-a+dotprod+fp16)
srcs=(util/mw_err.c util/mw_time.c util/mw_platform.c tests/neon/neon_selftest.c)
for f in kernels/*.c; do
  case "$f" in *_avx2.c|*_avxvnni.c|*_avx512.c|*_x86.c) continue ;; esac
  srcs+=("$f")
done
headers=$(ls kernels/*.h util/*.h tests/unit/kn_test_data.h tests/neon-check.sh)
objs=()
status=0
t0=$(date +%s)
for src in "${srcs[@]}"; do
  obj="$out/obj/$(echo "${src%.c}" | tr / _).o"
  objs+=("$obj")
  stale=0
  [ "$obj" -nt "$src" ] || stale=1
  for h in $headers; do [ "$h" -nt "$obj" ] && stale=1; done
  [ "$stale" -eq 0 ] && continue
  extra=()
  case "$src" in *_neon.c) extra=("${NEON_FLAGS[@]}") ;; esac
  "$CC" "${CFLAGS[@]}" "${extra[@]}" -c "$src" -o "$obj" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "[  FAILED  ] neon-check: the aarch64 cross build failed"
  exit 1
fi
# Static: with a dynamic binary, Debian's arm64 multiarch libc (libc6:arm64, pulled in by any
# :arm64 -dev package) is found through the host's ld.so.cache beside the cross sysroot's loader,
# and a loader and libc of two different builds hang in the first threaded test.
"$CC" -static -pthread "${objs[@]}" -lm -o "$out/neon_selftest" || {
  echo "[  FAILED  ] neon-check: linking the aarch64 self-test failed"
  exit 1
}
echo "== neon-check: aarch64 build in $(( $(date +%s) - t0 ))s; running under $QEMU"
timeout --signal=KILL "${NEON_TIMEOUT:-300}" "$QEMU" -L "$SYSROOT" "$out/neon_selftest" \
  tests/fixtures/llamacpp/kernels
rc=$?
echo "--- neon_selftest (qemu): exit $rc in $(( $(date +%s) - t0 ))s"
exit $rc
