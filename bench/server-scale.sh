#!/usr/bin/env bash
# Server scale: N concurrent runs of one attempt each through `redraft serve` (POST /v1/iterate,
# SQLite store on), side by side with the same runs in one process through the library and the
# same calls from reqwest alone, against the fake provider answering after 200 ms; with
# DATABASE_URL (a throwaway postgres:// database), also `redraft serve --no-worker` + 2
# `redraft worker` processes on it. Server RSS before, at the peak and idle after the burst;
# the store is counted after every burst. Writes bench/results/server-scale.{json,md}.
# RUNS ("5000 10000"), DELAY_MS (200), ROUNDS (3), TIMEOUT_S (300, per request), IDLE_S (5),
# PERF=1 (profile the server with perf during each burst) and DATABASE_URL may be set.
source "$(dirname "$0")/lib.sh"
build_bench
build_cli
need python3
RUNS="${RUNS:-5000 10000}"
export RUNS
max=0
for n in $RUNS; do if [ "$n" -gt "$max" ]; then max=$n; fi; done
# Every request is a connection into the server, and every run in flight one more out of it
# to the provider: the server needs 2 descriptors per concurrent run, the load client and the
# provider one each. Raise the soft limit to the hard one (raising the hard one needs
# privileges a container may not have).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
limit="$(ulimit -n)"
if [ "$limit" != unlimited ]; then
  if [ "$limit" -lt $(( max + 1000 )) ]; then
    echo "bench: open-files limit $limit is below RUNS + 1000 ($(( max + 1000 ))); raise it (ulimit -Hn)" >&2
    exit 2
  fi
  if [ "$limit" -lt $(( 2 * max + 1000 )) ]; then
    echo "bench: warning: open-files limit $limit is below 2 × RUNS + 1000 ($(( 2 * max + 1000 ))): with" \
      "every run in flight at once the server may run out of descriptors (counted as lost requests)" >&2
  fi
fi
cd "$BENCH" && exec python3 server_scale.py
