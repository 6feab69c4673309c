#!/usr/bin/env bash
# Installs the Python client the way the README says, offline and without
# build isolation, into a fresh folder, then runs its tests on what was
# installed against real gemm-server processes.
#
# Usage: python_client_test.sh GEMM_SERVER [PYTHON_DIR]
# PYTHON_DIR (default: the folder above this script) holds pyproject.toml;
# proto/gemm.proto is expected beside it, as in the repository.
set -euo pipefail
server=$(realpath "${1:?usage: python_client_test.sh GEMM_SERVER [PYTHON_DIR]}")
python_dir=$(realpath "${2:-$(dirname "$0")/..}")
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/python-client.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# pip builds inside the source folder: a copy keeps the checkout (and
# Bazel's runfiles) clean.
cp -rL "$python_dir" "$tmp/src"
/usr/bin/python3 -m pip install --quiet --disable-pip-version-check \
  --root-user-action=ignore --no-cache-dir --no-build-isolation --no-index \
  --no-deps --target "$tmp/site" "$tmp/src"

# Each test file (test_client.py: jobs, regions, errors; test_client_tls.py:
# TLS, tokens, mTLS) on its own servers; the first to fail fails the test.
for test in "$python_dir"/tests/test_*.py; do
  PYTHONPATH="$tmp/site" TEST_TMPDIR="$tmp" /usr/bin/python3 \
    "$test" "$server" "$python_dir/../proto/gemm.proto"
done
