#!/usr/bin/env bash
# deploy/check.sh: builds the image from deploy/Dockerfile with docker or
# podman, starts it as deploy/README.md says, and checks that it works: the
# health check, `info`, a verified `run`, a short verified `load`, the
# metrics endpoint, and a drain (SIGTERM while a job is in flight: the job
# must finish and the server exit 0). Fails loudly, naming the step.
#
#   deploy/check.sh                      # docker if its engine answers, else podman
#   deploy/check.sh --engine podman --gpu
#   deploy/check.sh --build-arg CUDA_DEVEL=local/cuda-devel:13.0 \
#       --build-arg CUDA_BASE=local/cuda-base:13.0 --build-arg GEMM_CUDA_ARCHS=90
#   deploy/check.sh --no-build --image gemm-server:0.2.0
#
# Options:
#   --engine docker|podman   the container engine (default: docker when
#                            `docker info` answers, else podman)
#   --image TAG              the image to build and run (default
#                            gemm-server:check)
#   --build-arg NAME=VALUE   passed to the build (base images, archs)
#   --no-build               run --image as it is
#   --gpu                    give the container every GPU (docker --gpus all,
#                            podman's CDI nvidia.com/gpu=all) and run the
#                            server with --backend cuda; without it the
#                            server runs with --backend cpu
#   --keep                   leave the container and image behind
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

engine=""
image="gemm-server:check"
build=1
gpu=0
keep=0
build_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --build-arg) build_args+=(--build-arg "$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --gpu) gpu=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  else
    echo "check.sh: FAIL: neither a docker engine nor podman" >&2
    exit 1
  fi
fi

name="gemm-check-$$"
step="start"
started=$(date +%s)
fail() {
  echo "check.sh: FAIL at step '$step': $*" >&2
  if "$engine" container exists "$name" >/dev/null 2>&1 ||
     "$engine" inspect "$name" >/dev/null 2>&1; then
    echo "--- server log (last 40 lines) ---" >&2
    "$engine" logs "$name" 2>&1 | tail -40 >&2 || true
  fi
  exit 1
}
cleanup() {
  "$engine" rm -f "$name" >/dev/null 2>&1 || true
  if [ "$keep" = 0 ] && [ "$build" = 1 ]; then
    "$engine" rmi "$image" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
say() { printf '[%4ds] %s\n' $(( $(date +%s) - started )) "$*"; }
# gemm-client inside the container, against the server there.
client() { "$engine" exec "$name" /opt/gemm/gemm-client "$@"; }

say "engine: $engine ($("$engine" --version | head -1)); image $image"
if [ "$build" = 1 ]; then
  step="build"
  say "building (deploy/Dockerfile${build_args[*]+, ${build_args[*]}})"
  "$engine" build -f deploy/Dockerfile -t "$image" ${build_args[@]+"${build_args[@]}"} . \
    > /tmp/gemm-check-build.log 2>&1 ||
    { tail -30 /tmp/gemm-check-build.log >&2; fail "the build failed (full log /tmp/gemm-check-build.log)"; }
  say "built: $("$engine" image inspect "$image" --format '{{.Size}}' |
    awk '{printf "%.0f MB", $1 / 1e6}')"
fi

step="run"
run_flags=(--name "$name" -d --stop-timeout 40
           -p 127.0.0.1::50051 -p 127.0.0.1::9464)
server_flags=(--listen 0.0.0.0:50051 --metrics-listen 0.0.0.0:9464)
if [ "$gpu" = 1 ]; then
  if [ "$engine" = docker ]; then
    run_flags+=(--gpus all)
  else
    run_flags+=(--device nvidia.com/gpu=all)
  fi
  server_flags+=(--backend cuda)
else
  server_flags+=(--backend cpu)
fi
"$engine" run "${run_flags[@]}" "$image" "${server_flags[@]}" >/dev/null ||
  fail "the container did not start"
metrics_port=$("$engine" port "$name" 9464 | head -1 | sed 's/.*://')
say "started $name (server flags: ${server_flags[*]}); metrics on 127.0.0.1:$metrics_port"

step="health"
for _ in $(seq 1 120); do
  if client health -s 127.0.0.1:50051 --timeout-s 2 >/dev/null 2>&1; then
    break
  fi
  [ "$("$engine" inspect -f '{{.State.Running}}' "$name")" = true ] ||
    fail "the server exited"
  sleep 1
done
client health -s 127.0.0.1:50051 --timeout-s 2 || fail "not SERVING after 120 s"
say "health: SERVING"

step="info"
client info -s 127.0.0.1:50051 | sed 's/^/    /' || fail "info failed"

step="run"
client run -s 127.0.0.1:50051 -m 1000 -n 999 -k 777 --verify | sed 's/^/    /' ||
  fail "a verified 1000x999x777 job failed"

step="load"
client load -s 127.0.0.1:50051 --shapes 128x128x128:0.7,257x129x511:0.3 \
  -c 16 --duration-s 5 --warmup-s 1 --verify-every 20 \
  > /tmp/gemm-check-load.txt || { cat /tmp/gemm-check-load.txt >&2; fail "load failed"; }
sed 's/^/    /' /tmp/gemm-check-load.txt | head -12
answered_all() {
  grep -Eq "whole run +sent ([0-9]+) .*answered \1 \(ok \1, errors 0\)" "$1"
}
answered_all /tmp/gemm-check-load.txt || fail "the load had errors"
grep -Eq "^Verified [1-9][0-9]* results .*, 0 failed" /tmp/gemm-check-load.txt ||
  fail "the load's results did not all verify"

step="metrics"
scrape() {
  if command -v curl >/dev/null; then
    curl -fsS "http://127.0.0.1:$metrics_port/metrics"
  else
    python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(
      'http://127.0.0.1:$metrics_port/metrics', timeout=5).read().decode())"
  fi
}
metrics=$(scrape) || fail "no answer from /metrics on 127.0.0.1:$metrics_port"
ok_jobs=$(printf '%s\n' "$metrics" |
  awk '/^gemm_jobs_total\{outcome="ok"/{n += $NF} END{print n + 0}')
[ "$ok_jobs" -gt 0 ] || fail "gemm_jobs_total counts no ok job"
printf '%s\n' "$metrics" | grep -E '^gemm_build_info' | sed 's/^/    /'
say "metrics: $ok_jobs jobs ok counted"

step="drain"
# SIGTERM while a load is running: the server keeps serving through its
# drain delay (5 s), so every job must finish, and the server exit 0. The
# client runs in a container of its own on the server's network, so that
# it outlives the server's.
if [ "$gpu" = 1 ]; then drain_load=(--shapes 4096x4096x4096 --count 40 -c 4)
else drain_load=(--shapes 2048x2048x2048 --count 10 -c 2); fi
"$engine" run --rm --network "container:$name" --entrypoint /opt/gemm/gemm-client \
  "$image" load -s 127.0.0.1:50051 "${drain_load[@]}" --warmup-s 0 \
  > /tmp/gemm-check-drain.txt 2>&1 &
job=$!
sleep 1.5
"$engine" stop -t 40 "$name" >/dev/null
wait "$job" || { cat /tmp/gemm-check-drain.txt >&2; fail "the load in flight failed"; }
answered_all /tmp/gemm-check-drain.txt ||
  { cat /tmp/gemm-check-drain.txt >&2; fail "jobs in flight failed during the drain"; }
code=$("$engine" inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "the server exited with $code"
"$engine" logs "$name" 2>&1 | grep -q "shut down cleanly" ||
  fail "no 'shut down cleanly' in the server's log"
say "drain: ${drain_load[*]} in flight at SIGTERM, all answered; exit 0; $(
  "$engine" logs "$name" 2>&1 | grep -o 'shut down cleanly.*' | tail -1)"
say "PASS"
