#!/usr/bin/env bash
# Runs the same workload (bench/workload.ts) against Debian's docker-registry (CNCF distribution
# 2.8) and against Wharf, one server at a time on this machine, then prints the comparison table
# (bench/report.ts). Raw results and the table land in bench/out/.
#
# Env: BENCH_ONLY=distribution|wharf runs one side; BENCH_SMALL=1 shrinks every phase (smoke run);
#      WRK_SECONDS (default 10).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/bench/out"
export RUST_BACKTRACE=0 NO_COLOR=1
ONLY="${BENCH_ONLY:-}"
WRK_SECONDS="${WRK_SECONDS:-10}"
SMALL_FLAG=()
[[ "${BENCH_SMALL:-}" == 1 ]] && SMALL_FLAG=(--small)

for tool in deno docker-registry wrk curl; do
  command -v "$tool" >/dev/null || { echo "bench: '$tool' not found on PATH" >&2; exit 1; }
done

TMP="$(mktemp -d -t wharf-bench-XXXXXX)"
SERVER_PID=""
WORKLOAD_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    # Give it 10 s to exit on SIGTERM before forcing it.
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
cleanup() {
  if [[ -n "$WORKLOAD_PID" ]]; then
    kill "$WORKLOAD_PID" 2>/dev/null || true
    wait "$WORKLOAD_PID" 2>/dev/null || true
  fi
  stop_server
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
# Never report a previous run's figures as this one's.
rm -f "$OUT"/{distribution,wharf}.{json,log}

free_port() {
  deno eval 'const l = Deno.listen({ hostname: "127.0.0.1", port: 0 }); console.log(l.addr.port); l.close();'
}

wait_ready() { # url logfile name
  for _ in $(seq 600); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "bench: $3 exited during startup; log tail:" >&2
      tail -n 40 "$2" >&2
      return 1
    fi
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$1/v2/")" == 200 ]]; then return 0; fi
    sleep 0.1
  done
  echo "bench: $3 not ready after 60 s; log tail:" >&2
  tail -n 40 "$2" >&2
  return 1
}

run_workload() { # label url
  echo "== $1 at $2 (pid $SERVER_PID)" >&2
  local rc=0
  timeout 240 deno run -A "$ROOT/bench/workload.ts" --url "$2" --label "$1" \
    --out "$OUT/$1.json" --pid "$SERVER_PID" --wrk-seconds "$WRK_SECONDS" \
    "${SMALL_FLAG[@]}" &
  # In the background and waited for, so a signal to this script is handled at once.
  WORKLOAD_PID=$!
  wait "$WORKLOAD_PID" || rc=$?
  WORKLOAD_PID=""
  if [[ $rc -ne 0 ]]; then
    echo "bench: workload against $1 failed (exit $rc); server log tail:" >&2
    tail -n 30 "$TMP/$1.log" >&2
  fi
  # Keep the server log (bench/out is gitignored) for a look at warnings after the run.
  cp "$TMP/$1.log" "$OUT/$1.log" 2>/dev/null || true
  return 0
}

bench_distribution() {
  local port dir="$TMP/distribution"
  port="$(free_port)"
  mkdir -p "$dir/data"
  # Debian's packaged defaults (inmemory blob descriptor cache) minus auth and the periodic
  # storage health check, on loopback with deletes enabled. Per-request logging is off: at its
  # default info level distribution writes two lines per request, a cost Wharf (which currently
  # logs no line per request) would not be paying. BENCH_REGISTRY_LOG=info turns it back on.
  local level="${BENCH_REGISTRY_LOG:-warn}" accesslog=true
  [[ "$level" == info || "$level" == debug ]] && accesslog=false
  cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: $level
  accesslog:
    disabled: $accesslog
  fields:
    service: registry
storage:
  cache:
    blobdescriptor: inmemory
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  headers:
    X-Content-Type-Options: [nosniff]
EOF
  docker-registry serve "$dir/config.yml" >"$TMP/distribution.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "http://127.0.0.1:$port" "$TMP/distribution.log" docker-registry
  run_workload distribution "http://127.0.0.1:$port"
  stop_server
  rm -rf "$dir/data"
}

bench_wharf() {
  local port dir="$TMP/wharf"
  port="$(free_port)"
  mkdir -p "$dir"
  cat >"$dir/wharf.toml" <<EOF
[server]
bind_address = "127.0.0.1"
port = $port

[blob_store.fs]
root_dir = "$dir/blobs"

[metadata_store]
path = "$dir/metadata.kv"
EOF
  # As a user starts it: the task's permission set and V8 flags (deno task passes SIGTERM on).
  (cd "$ROOT" && exec deno task start -c "$dir/wharf.toml") >"$TMP/wharf.log" 2>&1 &
  SERVER_PID=$!
  if wait_ready "http://127.0.0.1:$port" "$TMP/wharf.log" Wharf; then
    run_workload wharf "http://127.0.0.1:$port"
  fi
  stop_server
  rm -rf "$dir"
}

[[ "$ONLY" == "" || "$ONLY" == distribution ]] && bench_distribution
[[ "$ONLY" == "" || "$ONLY" == wharf ]] && bench_wharf

deno run -A "$ROOT/bench/report.ts" "$OUT/distribution.json" "$OUT/wharf.json" "$OUT"
