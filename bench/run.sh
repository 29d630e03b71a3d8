#!/usr/bin/env bash
# bench/run.sh — `make bench`: runs each benchmark program given as an argument, in order. Every
# benchmark prints JSON lines; this script only adds a header per program and the exit status.
# Numbers are only trustworthy on a quiet machine.
set -uo pipefail
status=0
for bin in "$@"; do
  echo "== $(basename "$bin")"
  "$bin" || { echo "!! $(basename "$bin") exited with status $?"; status=1; }
done
exit $status
