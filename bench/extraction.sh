#!/usr/bin/env bash
# Extraction benchmark: agreement with ../shared/corpora/jsonextract and throughput of
# redraft_extract::extract vs Python json_repair and npm jsonrepair.
# Writes bench/results/extraction.{json,md}. ROUNDS (7) and MIN_SECS (1.0) may be set.
source "$(dirname "$0")/lib.sh"
[ -d "$CORPORA/jsonextract" ] || { echo "bench: $CORPORA/jsonextract is missing" >&2; exit 2; }
build_bench
venv extract
node_deps
cd "$BENCH" && exec python3 extraction.py
