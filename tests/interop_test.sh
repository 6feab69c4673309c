#!/usr/bin/env bash
# Runs interop_test.py with the system Python, which has Debian's grpcio,
# protobuf and numpy.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/interop_test.py" "$@"
