#!/usr/bin/env bash
# bench/run.sh — `make bench`: runs each benchmark program given as an argument, in order, after a
# header naming the machine, the commit and the load. Every benchmark prints JSON lines; this
# script only adds a header per program and the exit status. Benchmarks never fail on speed.
# Numbers are only trustworthy on a quiet machine.
#   MW_BENCH_FILTER=substr   run only programs whose path contains substr
#   LLAMA_BENCH=path         llama.cpp's llama-bench: bench_model, bench_deepseek and bench_kimi
#                            compare with it on the same files
#   GGML_MM=path             ggml's matmul driver (make ggml-mm): bench_kernels compares with it
#   LLAMA_TOK=path           llama.cpp's tokenizer driver (make llama-tok): bench_tokenizer compares
#                            with it; js-tiktoken too when build/npm holds it (make test installs it)
case "${1:-}" in # --help: the comment above, which is the usage
--help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac
set -uo pipefail
echo "== moewire benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== $(uname -srm); load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
status=0
for bin in "$@"; do
  [ -n "${MW_BENCH_FILTER:-}" ] && [[ "$bin" != *"$MW_BENCH_FILTER"* ]] && continue
  echo "== $(basename "$bin")"
  args=()
  case "$(basename "$bin")" in
    bench_model) ref=${LLAMA_BENCH:-} ref_var=LLAMA_BENCH ref_opt=--llama-bench ;;
    bench_kernels) ref=${GGML_MM:-} ref_var=GGML_MM ref_opt=--ggml-mm ;;
    bench_tokenizer) ref=${LLAMA_TOK:-} ref_var=LLAMA_TOK ref_opt=--llama-tok
      [ -d build/npm/node_modules/js-tiktoken ] && args=(--tiktoken build/npm) ;;
    *) ref= ;;
  esac
  if [ -n "$ref" ]; then
    if [ -x "$ref" ]; then
      args+=("$ref_opt" "$ref")
    else
      echo "   $ref_var=$ref is not an executable file: the comparison is skipped"
    fi
  fi
  "$bin" "${args[@]}" || { echo "!! $(basename "$bin") exited with status $?"; status=1; }
done
exit $status
