#!/usr/bin/env bash
# The loopback ceiling for one large pull to curl on this machine (bench/README.md, core bench):
# a 256 MiB file served by bench/loopback_ceiling.c with sendfile and with read/write, 7 curl
# pulls each, MB/s. Needs gcc and curl. Usage: bash bench/loopback_ceiling.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/srv" "$here/loopback_ceiling.c"
head -c 268435456 /dev/urandom >"$tmp/blob"
cat "$tmp/blob" >/dev/null # in the page cache, as a served blob is
port=$((20000 + RANDOM % 20000))
for mode in sendfile rw; do
  "$tmp/srv" "$port" "$mode" "$tmp/blob" &
  pid=$!
  sleep 0.3
  printf '%-8s' "$mode:"
  for _ in 1 2 3 4 5 6 7; do
    curl -s -o /dev/null -w '%{speed_download}\n' "http://127.0.0.1:$port/blob"
  done | awk '{ printf " %.0f", $1 / 1e6 } END { print " MB/s" }'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
done
