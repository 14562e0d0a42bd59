#!/usr/bin/env bash
# The run behind the README's figures: every variant at 1, 30, 100 and 300 threads, 5 timed
# repetitions each after a warm-up, on the embedded server. Writes benchmarks/results.json
# (machine-readable, with the machine it ran on) and benchmarks/results.txt (the table).
# Usage, from the repository root with the package installed (pip install -e '.[bench]'):
#   bash benchmarks/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python -m requests_fastssl bench --concurrency 1,30,100,300 --repeat 5 \
    --json benchmarks/results.json | tee benchmarks/results.txt
