#!/usr/bin/env bash
# bazel run //:install, used as a program outside the workspace would: the
# install goes into a fresh prefix; a small consumer (tests/install/) is
# built against it with plain g++ and pkg-config, and with CMake's
# find_package; each build submits a GEMM to the installed gemm-server and
# checks it, and the server counts both jobs.
#
#   install_test.sh INSTALL CONSUMER_DIR
set -euo pipefail
install_bin=$(realpath "$1") consumer_dir=$(realpath "$2")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

"$install_bin" "$prefix"
[ -x "$prefix/bin/gemm-server" ] && [ -f "$prefix/lib/libgemm_client.so" ] ||
  fail "install left no server or library in $prefix"

"$prefix/bin/gemm-server" --listen 127.0.0.1:0 --backend cpu --port-file "$tmp/port" \
  --log-level warn --drain-delay-s 0 > "$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
[ -s "$tmp/port" ] || fail "the installed gemm-server did not start: $(cat "$tmp/server.log")"
address=127.0.0.1:$(cat "$tmp/port")

# 1. g++ and pkg-config, nothing else.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
g++ -O1 -o "$tmp/consumer-pkg-config" "$consumer_dir/consumer.cc" \
  $(pkg-config --cflags --libs gemm_client) ||
  fail "g++ with pkg-config could not build the consumer"
"$tmp/consumer-pkg-config" "$address" || fail "the pkg-config build's GEMM"
unset PKG_CONFIG_PATH

# 2. CMake, find_package(gemm_client).
cmake -S "$consumer_dir" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$tmp/cmake.log" 2>&1 ||
  fail "cmake configure: $(cat "$tmp/cmake.log")"
cmake --build "$tmp/build" > "$tmp/cmake-build.log" 2>&1 ||
  fail "cmake build: $(tail -30 "$tmp/cmake-build.log")"
"$tmp/build/consumer" "$address" || fail "the CMake build's GEMM"

jobs=$("$prefix/bin/gemm-client" info -s "$address" |
  sed -n 's/.*jobs ok \([0-9]*\),.*/\1/p')
[ "$jobs" = 2 ] || fail "the server computed $jobs jobs, not 2"
echo "PASS: built with pkg-config and with CMake against $prefix; the server computed both GEMMs"
