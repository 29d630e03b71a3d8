# bench/serve_lib.sh — what the serving benchmark scripts share, sourced by them (not run): a work
# directory and JSON-lines file removed at exit with every server the script started, waiting
# for a coordinator's ready file, a free port, and waiting for llama-server's /health.

# Sets dir (a fresh directory), out (MW_OUT, else a file in dir, emptied) and pids; at exit the
# servers in pids are stopped and dir removed.
serve_setup() {
  dir=$(mktemp -d)
  out=${MW_OUT:-$dir/lines.jsonl}
  : >"$out"
  pids=()
  trap serve_cleanup EXIT
}
serve_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}

# Prints the URL a coordinator wrote to its ready file; stops the script, showing the log, when
# the server exits or is not ready within 6 minutes. Args: ready file; pid; log.
wait_ready() {
  for _ in $(seq 1 1800); do
    kill -0 "$2" 2>/dev/null || { echo "server exited; its log:" >&2; cat "$3" >&2; exit 1; }
    if [ -s "$1" ]; then cat "$1"; return; fi
    sleep 0.2
  done
  echo "server not ready" >&2
  exit 1
}

# A TCP port free on 127.0.0.1 at the moment.
free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Waits until the llama-server on port answers /health; stops the script, showing the log, when it
# exits first. Args: port; pid; log.
wait_health() {
  for _ in $(seq 1 1800); do
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
}
