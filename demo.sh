#!/usr/bin/env bash
# The Quick start's main job: starts gemm-server on its built-in defaults
# (the CPU backend where there is no GPU) on a free loopback port, asks it
# what it runs on, submits real GEMMs with gemm-client (each checked against
# a float64 reference) and stops the server gracefully.
#
#   ./bazelw run //:demo
set -euo pipefail

runfiles="${RUNFILES_DIR:-$0.runfiles}/gemm_service"
[ -d "$runfiles" ] || runfiles="$(cd "$(dirname "$0")" && pwd)"
server="$runfiles/server/gemm-server"
client="$runfiles/client/gemm-client"

workdir=$(mktemp -d)
trap 'kill $server_pid 2>/dev/null || true; rm -rf "$workdir"' EXIT

"$server" --listen 127.0.0.1:0 --port-file "$workdir/port" &
server_pid=$!
for _ in $(seq 1 200); do
  [ -s "$workdir/port" ] && break
  sleep 0.05
done
[ -s "$workdir/port" ] || { echo "demo: gemm-server did not start" >&2; exit 1; }
address="127.0.0.1:$(cat "$workdir/port")"

echo "== gemm-client info"
"$client" info --server "$address"
echo
echo "== 1000x999x777, three times (10 MB: sent as a stream of chunks)"
"$client" run --server "$address" -m 1000 -n 999 -k 777 --verify --repeat 3
echo
echo "== 1x1x1, unary"
"$client" run --server "$address" -m 1 -n 1 -k 1 --verify
echo
echo "== 512x768x256 with A and B transposed, alpha 0.5, beta 2"
"$client" run --server "$address" -m 512 -n 768 -k 256 --trans-a --trans-b \
  --alpha 0.5 --beta 2 --verify
echo
echo "== 2048^3 (48 MB moved)"
"$client" run --server "$address" -m 2048 -n 2048 -k 2048 --repeat 2

kill -TERM "$server_pid"
wait "$server_pid"
echo
echo "demo: gemm-server shut down cleanly"
