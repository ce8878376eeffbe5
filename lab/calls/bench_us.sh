#!/usr/bin/env bash
# Prints the time in us of one `bench` row of a CLI, or nan when the run fails or times out.
#   lab/calls/bench_us.sh CLI [bench arguments ...]     (BENCH_TIMEOUT seconds, default 30)
set -uo pipefail
cli=$1; shift
json=$(mktemp)
timeout "${BENCH_TIMEOUT:-30}" "$cli" bench "$@" --json "$json" >/dev/null 2>&1
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"][0]["us"])' "$json" 2>/dev/null || echo nan
rm -f "$json"
