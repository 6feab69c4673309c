#!/usr/bin/env bash
# libgemm_blas.so against a real gemm-server (CPU backend):
#  1. the netlib reference BLAS test of SGEMM (xblat3s, Debian's
#     libblas-test) passes with the drop-in preloaded and every call sent
#     (GEMM_BLAS_MIN_SIZE=0), and the server counts the jobs;
#  2. the same for cblas_sgemm, column- and row-major (xscblat3);
#  3. numpy's float32 matmul, preloaded, matches float64 and the server
#     counts its calls;
#  4. with the server down, numpy still gets the right answers (from the
#     local BLAS) and one line on stderr says why;
#  5. calls under the threshold stay local;
#  6. a program built like numpy's wheels (a module loaded with dlopen,
#     linked with an OpenBLAS whose symbols are scipy_cblas_sgemm64_) is
#     served too, and with the server down its own BLAS answers.
#
#   blas_dropin_test.sh GEMM_SERVER GEMM_CLIENT LIBGEMM_BLAS WHEEL_SOURCES
set -euo pipefail
server_bin=$(realpath "$1") client_bin=$(realpath "$2") dropin=$(realpath "$3")
wheel=$(realpath "$4")
blas_tests=/usr/lib/x86_64-linux-gnu/blas
tmp=${TEST_TMPDIR:-$(mktemp -d)}
cd "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$server_bin" --listen 127.0.0.1:0 --backend cpu --port-file port \
  --log-level warn --drain-delay-s 0 > server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
[ -s port ] || fail "gemm-server did not start: $(cat server.log)"
address=127.0.0.1:$(cat port)
jobs_ok() {
  "$client_bin" info -s "$address" | sed -n 's/.*jobs ok \([0-9]*\),.*/\1/p'
}
export GEMM_BLAS_SERVER=$address

# 1. sgemm_: every call at or above size 0 goes to the service.
before=$(jobs_ok)
LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=0 "$blas_tests/xblat3s" \
  < "$blas_tests/sblat3.in" > xblat3s.log 2>&1 || true
grep -q "SGEMM  PASSED THE TESTS OF ERROR-EXITS" sblat3.out ||
  fail "xblat3s: SGEMM's error exits: $(cat sblat3.out xblat3s.log)"
grep -q "SGEMM  PASSED THE COMPUTATIONAL TESTS" sblat3.out ||
  fail "xblat3s: SGEMM: $(cat sblat3.out xblat3s.log)"
sent=$(( $(jobs_ok) - before ))
# Calls with m, n or k = 0 or alpha = 0 stay local: 6,750 of the 17,496 are
# sent.
[ "$sent" -ge 6000 ] || fail "xblat3s: the server computed only $sent jobs"
echo "xblat3s: SGEMM passed; the service computed $sent of its calls"

# 2. cblas_sgemm, both orders; the reference BLAS after the drop-in holds
# the CBLAS test's error handler.
before=$(jobs_ok)
LD_PRELOAD="$dropin $blas_tests/libblas.so.3" GEMM_BLAS_MIN_SIZE=0 \
  "$blas_tests/xscblat3" < "$blas_tests/sin3" > xscblat3.log 2>&1 || true
for what in "TESTS OF ERROR-EXITS" "COLUMN-MAJOR COMPUTATIONAL TESTS" \
            "ROW-MAJOR    COMPUTATIONAL TESTS"; do
  grep -q "cblas_sgemm  PASSED THE $what" xscblat3.log ||
    fail "xscblat3: cblas_sgemm $what: $(cat xscblat3.log)"
done
sent=$(( $(jobs_ok) - before ))
[ "$sent" -ge 12000 ] || fail "xscblat3: the server computed only $sent jobs"
echo "xscblat3: cblas_sgemm passed (both orders); the service computed $sent"

# 3. numpy, float32: plain, Fortran-ordered and transposed operands.
cat > matmul.py <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(int(sys.argv[1]))
def operand(shape):  # never zero: uniform magnitudes in [0.1, 1), random signs
    return (rng.uniform(0.1, 1, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
a, b = operand((300, 257)), operand((257, 301))
want = a.astype(np.float64) @ b.astype(np.float64)
for got in (a @ b, np.asfortranarray(a) @ b, (b.T @ a.T).T):
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert got.dtype == np.float32 and err < 1e-5, err
print("numpy float32 matmul: 3 products within 1e-5 of float64")
PY
before=$(jobs_ok)
LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=0 /usr/bin/python3 matmul.py 1 2> numpy.err ||
  fail "numpy with the drop-in: $(cat numpy.err)"
sent=$(( $(jobs_ok) - before ))
[ "$sent" = 3 ] || fail "numpy: the server computed $sent jobs, not 3"
[ ! -s numpy.err ] || fail "numpy: unexpected stderr: $(cat numpy.err)"
echo "numpy: 3 products, all computed by the service"

# 4. The service down: the local BLAS answers, and says so once.
GEMM_BLAS_SERVER=127.0.0.1:1 LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=0 \
  /usr/bin/python3 matmul.py 2 2> down.err || fail "numpy, service down: $(cat down.err)"
[ "$(grep -c '^gemm-blas: ' down.err)" = 1 ] ||
  fail "service down: want one gemm-blas line, got: $(cat down.err)"
grep -q "127.0.0.1:1 did not compute an SGEMM (UNAVAILABLE" down.err ||
  fail "service down: $(cat down.err)"
echo "service down: correct results from the local BLAS, one line: $(cut -c1-80 down.err)..."

# 5. Products of fewer multiply-adds than the threshold stay local: these
# are 300 * 301 * 257 each.
before=$(jobs_ok)
LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=$((300 * 301 * 257 + 1)) \
  /usr/bin/python3 matmul.py 3
[ "$(jobs_ok)" = "$before" ] || fail "calls under the threshold were sent"

# 6. The wheel's layout: module -> libfakeblas64.so, loaded RTLD_LOCAL.
gcc -shared -fPIC -o libfakeblas64.so "$wheel/fakeblas64.c"
gcc -shared -fPIC -o libcaller.so "$wheel/caller.c" -L. -lfakeblas64 \
  -Wl,-rpath,'$ORIGIN'
gcc -o wheel_main "$wheel/main.c" -ldl -lm
before=$(jobs_ok)
LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=0 ./wheel_main ./libcaller.so ||
  fail "the wheel-like program with the drop-in"
[ "$(( $(jobs_ok) - before ))" = 1 ] || fail "scipy_cblas_sgemm64_ was not sent"
GEMM_BLAS_SERVER=127.0.0.1:1 LD_PRELOAD=$dropin GEMM_BLAS_MIN_SIZE=0 \
  ./wheel_main ./libcaller.so 2> wheel-down.err ||
  fail "the wheel-like program, service down: $(cat wheel-down.err)"
! grep -q "no BLAS to hand calls to" wheel-down.err ||
  fail "the wheel's own BLAS was not found: $(cat wheel-down.err)"
echo "numpy-wheel layout: scipy_cblas_sgemm64_ served, and answered by its own BLAS when the service is down"
echo "PASS"
