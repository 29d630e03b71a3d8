#!/usr/bin/env bash
# bench/run.sh — `make bench`: runs each benchmark program given as an argument, in order, after a
# header naming the machine, the commit and the load. Every benchmark prints JSON lines; this
# script only adds a header per program and the exit status. Benchmarks never fail on speed.
# Numbers are only trustworthy on a quiet machine.
#   MW_BENCH_FILTER=substr   run only programs whose path contains substr
#   LLAMA_BENCH=path         llama.cpp's llama-bench: bench_model compares with it on the same files
set -uo pipefail
echo "== moewire benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== $(uname -srm); load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
status=0
for bin in "$@"; do
  [ -n "${MW_BENCH_FILTER:-}" ] && [[ "$bin" != *"$MW_BENCH_FILTER"* ]] && continue
  echo "== $(basename "$bin")"
  args=()
  if [ "$(basename "$bin")" = bench_model ] && [ -n "${LLAMA_BENCH:-}" ]; then
    if [ -x "$LLAMA_BENCH" ]; then
      args=(--llama-bench "$LLAMA_BENCH")
    else
      echo "   LLAMA_BENCH=$LLAMA_BENCH is not an executable file: llama.cpp comparison skipped"
    fi
  fi
  "$bin" "${args[@]}" || { echo "!! $(basename "$bin") exited with status $?"; status=1; }
done
exit $status
