#!/usr/bin/env bash
# Loop overhead: CPU and peak RSS per attempt of redraft (library and CLI), Instructor and
# PydanticAI against one fake OpenAI-compatible server on 127.0.0.1 (no added latency).
# Writes bench/results/loop-overhead.{json,md}. RUNS (200), WARMUP (20), ROUNDS (5) may be set.
source "$(dirname "$0")/lib.sh"
build_bench
build_cli
venv instructor
venv pydantic-ai
cd "$BENCH" && exec python3 loop_overhead.py
