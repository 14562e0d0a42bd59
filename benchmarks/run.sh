#!/usr/bin/env bash
# The run behind the README's figures: the sequential scenario (20 requests in a row) and every
# variant at 1, 30, 100 and 300 threads, 21 timed repetitions each after a warm-up, on the
# embedded server. Writes benchmarks/openssl-X.Y/results.json (machine-readable, with the
# machine it ran on) and results.txt (the table), X.Y being the OpenSSL of the Python running it.
#
# From the repository root with the package installed (pip install -e '.[bench]'):
#   bash benchmarks/run.sh [PYTHON]      (default: $PYTHON, else python3)
# The same on CPython 3.14 / OpenSSL 3.6 in tools/platforms.sh's Debian sid root (root needed),
# then copied out of the root:
#   bash tools/platforms.sh sid --run bash benchmarks/run.sh
#   cp ~/.cache/requests-fastssl/platforms/sid/src/benchmarks/openssl-3.6/* benchmarks/openssl-3.6/
#
# The committed results change only when a run finishes: it writes to a temporary directory,
# moved into place at the end; an interpreter without the package (or trustme) stops it first.
set -euo pipefail
python=${1:-${PYTHON:-python3}}
# A path is taken from where the script was called, before the cd below.
case $python in */*) python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python") ;; esac
cd "$(dirname "$0")/.."
if ! "$python" -c 'import requests_fastssl, trustme' 2>/dev/null; then
    echo "benchmarks/run.sh: $python cannot import requests_fastssl and trustme;" \
        "install them (pip install -e '.[bench]') or name another interpreter" >&2
    exit 2
fi
out=benchmarks/$("$python" -c 'import ssl; print("openssl-%d.%d" % ssl.OPENSSL_VERSION_INFO[:2])')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
"$python" -m requests_fastssl bench --sequential 20 --concurrency 1,30,100,300 --repeat 21 \
    --json "$tmp/results.json" | tee "$tmp/results.txt" || status=$?
# A run that ended with a failed request (exit 1; the embedded server has answered one
# handshake of thousands with a decode_error alert) is kept: the results name the failure and
# leave that row without a comparison. One that was interrupted or broke is not.
if [ "$status" -gt 1 ] || ! "$python" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["interrupted"] is not False)' "$tmp/results.json" 2>/dev/null; then
    echo "benchmarks/run.sh: bench did not finish (exit $status); the committed results are unchanged" >&2
    exit $(( status ? status : 1 ))
fi
mkdir -p "$out"
mv "$tmp/results.json" "$tmp/results.txt" "$out/"
[ "$status" -eq 0 ] || echo "benchmarks/run.sh: kept, but a request failed: see the results" >&2
exit "$status"
