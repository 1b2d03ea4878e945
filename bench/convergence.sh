#!/usr/bin/env bash
# Convergence with a real small model: one call vs Instructor (max_retries=2) vs redraft
# (max_iterations=3) on DeepJSONEval extraction tasks (../shared/corpora/tasks; TASKS=people: the
# 30 flat person extractions of bench/tasks/people.jsonl instead; TASKS=flat: those and the 10
# order lines of bench/tasks/orders.jsonl; TASKS=staffing: the contracts
# of examples/staffing filled through `--kind fill`, with the kind's hints and without;
# TASKS=people-kind: the people through the person kind, with its hints and without), with
# SmolLM2-135M-Instruct under llama-server, started here (bench/local-model.sh: built and cached
# on first use, ~5 min) and stopped at the end.
# Writes bench/results/convergence.{json,md} (convergence-people.*, convergence-staffing.* for those sets). N (30 tasks), MAX_TOKENS (512), SYSTEMS,
# BENCH_VARIANTS (see convergence.py), LOCAL_MODEL_THREADS (2: the model is the only work)
# may be set. BEFORE_REV=<git revision> also measures the CLI built from that revision
# (e.g. BEFORE_REV=fee0877, the code before the changes of BENCHMARKS.md section 5).
source "$(dirname "$0")/lib.sh"
[ -f "$CORPORA/tasks/deepjsoneval-dev.jsonl" ] || { echo "bench: $CORPORA/tasks is missing" >&2; exit 2; }
build_cli
venv convergence
if [ -n "${BEFORE_REV:-}" ]; then
  src="$CARGO_TARGET_DIR/src-$BEFORE_REV"
  if [ ! -f "$src/Cargo.toml" ]; then
    mkdir -p "$src" && git -C "$ROOT" archive "$BEFORE_REV" | tar -x -C "$src"
  fi
  echo "bench: building redraft-cli at $BEFORE_REV" >&2
  cargo build --release --locked --manifest-path "$src/Cargo.toml" -p redraft-cli \
    --target-dir "$CARGO_TARGET_DIR/before-$BEFORE_REV" >&2
  export BENCH_REDRAFT_BEFORE="$CARGO_TARGET_DIR/before-$BEFORE_REV/release/redraft"
fi
# Three attempts with their feedback over ~1,500-token prompts need more than 4096 tokens.
export LOCAL_MODEL_CTX="${LOCAL_MODEL_CTX:-8192}" LOCAL_MODEL_THREADS="${LOCAL_MODEL_THREADS:-2}"
LOCAL_MODEL_STATE="$(mktemp -d)"
export LOCAL_MODEL_STATE
trap '"$BENCH/local-model.sh" stop; rm -rf "$LOCAL_MODEL_STATE"' EXIT
BASE_URL="$("$BENCH/local-model.sh" start)"
export BASE_URL
cd "$BENCH" && "$BENCH/.venv/convergence/bin/python" convergence.py
