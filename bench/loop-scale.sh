#!/usr/bin/env bash
# Scale: 10,000 concurrent runs (3 attempts each) in one redraft process, against the fake
# server answering after 500 ms. Writes bench/results/loop-scale.{json,md}.
# RUNS (10000), DELAY_MS (500), ROUNDS (5) may be set.
source "$(dirname "$0")/lib.sh"
build_bench
# 10,000 connections need 10,000 descriptors in the client and in the server: raise the soft
# limit to the hard one (raising the hard one needs privileges a container may not have).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $(( ${RUNS:-10000} + 1000 )) ]; then
  echo "bench: open-files limit $(ulimit -n) is below RUNS + 1000; raise it (ulimit -Hn)" >&2
  exit 2
fi
cd "$BENCH" && exec python3 loop_scale.py
