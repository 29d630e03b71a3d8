#!/usr/bin/env bash
# tests/posix-check.sh — the portable build's check (`make posix-check`; `make test` runs it): every
# C file of the library and the programs compiled (syntax and types, no code) as a non-Linux POSIX
# system sees them: no _GNU_SOURCE, _POSIX_C_SOURCE=200809L with glibc's _DEFAULT_SOURCE (the BSD
# and SVID interfaces, as macOS has them), the __linux__ macros undefined so every Linux branch
# falls away, the BSD interfaces macOS declares by default (tests/posix/bsd.h), and Linux-only
# headers refused (tests/posix/include). The instruction-set files are left out: they hold
# intrinsics, no system calls. Only util/mw_platform.c may use Linux's extensions, and only in
# its Linux branch.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-gcc}
pkgs="libzmq libprotobuf-c libuv liblz4 libsodium jansson libcrypto libpcre2-8"
flags=(-std=c11 -ffp-contract=off -U_GNU_SOURCE -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
       -U__linux__ -U__linux -Ulinux -U__gnu_linux__ -include tests/posix/bsd.h
       -Itests/posix/include -I. -Ibuild/gen -isystem /usr/share/include/llhttp
       -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wshadow
       -Wstrict-prototypes -fsyntax-only)
# shellcheck disable=SC2086 # one word per package
read -r -a pkg <<<"$(pkg-config --cflags $pkgs)"
t0=$(date +%s)
n=0
failed=()
for f in util/*.c kernels/*.c vindex/*.c model/*.c tokenizer/*.c grammar/*.c wire/*.c metal/*.c \
         coordinator/*.c expert-node/*.c; do
  case "$f" in *_avx2.c|*_avxvnni.c|*_avx512.c|*_neon.c|*_x86.c) continue ;; esac
  n=$((n + 1))
  "$CC" "${flags[@]}" "${pkg[@]}" "$f" || failed+=("$f")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "[  FAILED  ] posix-check: ${#failed[@]} of $n files use more than POSIX + BSD: ${failed[*]}"
  exit 1
fi
echo "[  PASSED  ] posix-check: $n files compile as POSIX.1-2008 + BSD in $(( $(date +%s) - t0 ))s"
