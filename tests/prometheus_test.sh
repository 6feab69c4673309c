#!/usr/bin/env bash
# Runs prometheus_test.py with the system Python.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/prometheus_test.py" "$@"
