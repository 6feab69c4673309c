#!/usr/bin/env bash
# Runs every fuzz target of the repository under libFuzzer, with clang's
# AddressSanitizer and UndefinedBehaviorSanitizer, for RUNS inputs each, and
# writes a JSON report. The targets' short regression runs are part of
# `bazel test //...` (<target>_test); this is the long run.
#
#   tests/fuzz/run_fuzzers.sh [RUNS] [REPORT]     (defaults: 1000000, fuzz-report.json)
#   FUZZ_UPDATE_CORPUS=1 tests/fuzz/run_fuzzers.sh   also merges what the run
#                                                  found into the checked-in corpus
#
# It builds with `--config=fuzz` in an output base of its own
# ($GEMM_FUZZ_OUTPUT_BASE, default ~/.cache/gemm-service-fuzz), so the usual
# gcc build is left as it is. Needs clang (Debian's clang 14).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
runs=${1:-1000000}
report=${2:-fuzz-report.json}
base=${GEMM_FUZZ_OUTPUT_BASE:-$HOME/.cache/gemm-service-fuzz}
# target label, corpus directory
targets=(
  "//proto:wire_codec_fuzzer proto/corpus/wire_codec"
  "//server/admission:validation_fuzzer server/admission/corpus/validation"
  "//server/rpc:stream_session_fuzzer server/rpc/corpus/stream_session"
)
labels=()
for t in "${targets[@]}"; do labels+=("${t%% *}"); done
# No convenience symlinks: they would point the usual build into this one.
bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ "${labels[@]}" >&2
bin=$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
entries=()
status=0
for t in "${targets[@]}"; do
  label=${t%% *}
  corpus=${t##* }
  name=${label##*:}
  path="$bin/${label#//}"
  path=${path/://}
  mkdir -p "$work/$name/new" "$work/$name/artifacts"
  echo "== $label: $runs inputs" >&2
  start=$(date +%s)
  rc=0
  "$path" -runs="$runs" -print_final_stats=1 \
    -artifact_prefix="$work/$name/artifacts/" \
    "$work/$name/new" "$corpus" >"$work/$name/log" 2>&1 || rc=$?
  seconds=$(( $(date +%s) - start ))
  grep -E "^stat::|^Done|SUMMARY|ERROR" "$work/$name/log" >&2 || true
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$name/log")
  added=$(sed -n 's/^stat::new_units_added: *//p' "$work/$name/log")
  crashes=$(find "$work/$name/artifacts" -type f | wc -l)
  seeds=$(find "$corpus" -type f | wc -l)
  if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
    status=1
    mkdir -p fuzz-artifacts && cp -r "$work/$name/artifacts" "fuzz-artifacts/$name"
    tail -40 "$work/$name/log" >&2
  fi
  if [ -n "${FUZZ_UPDATE_CORPUS:-}" ] && [ "$status" = 0 ]; then
    "$path" -merge=1 "$corpus" "$work/$name/new" >/dev/null 2>&1
  fi
  entries+=("$(printf '{"target": "%s", "runs": %s, "seconds": %s, "exec_per_s": %s, "new_inputs": %s, "seed_inputs": %s, "crashes": %s, "exit_code": %s}' \
    "$label" "${executed:-0}" "$seconds" "${rate:-0}" "${added:-0}" "$seeds" "$crashes" "$rc")")
done
{
  printf '{\n  "date": "%s",\n  "commit": "%s",\n  "host": "%s, %s cores",\n  "compiler": "%s",\n  "sanitizers": "address, undefined, fuzzer",\n  "targets": [\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(uname -sr)" "$(nproc)" "$(clang --version | head -1)"
  for i in "${!entries[@]}"; do
    sep=","; [ "$i" = $(( ${#entries[@]} - 1 )) ] && sep=""
    printf '    %s%s\n' "${entries[$i]}" "$sep"
  done
  printf '  ]\n}\n'
} >"$report"
cat "$report"
exit "$status"
