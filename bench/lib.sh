# Sourced by the bench scripts: paths, the Rust build, the Python venvs, the npm peers.
# Every step is idempotent, so a rerun only measures.
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(dirname "$ROOT")/target-bench}"
CORPORA="$(dirname "$ROOT")/shared/corpora"

need() { command -v "$1" >/dev/null || { echo "bench: $1 is required" >&2; exit 2; }; }

# The bench binaries (their own workspace, release profile of the root).
build_bench() {
  need cargo
  echo "bench: building bench/ in release (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
  cargo build --release --locked --manifest-path "$BENCH/Cargo.toml" >&2
}

# The redraft CLI, from the main workspace, into the same target dir.
build_cli() {
  echo "bench: building redraft-cli in release" >&2
  cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p redraft-cli >&2
}

# venv NAME: bench/.venv/NAME with bench/requirements-NAME.txt installed exactly.
venv() {
  local dir="$BENCH/.venv/$1" req="$BENCH/requirements-$1.txt"
  if [ ! -f "$dir/.installed" ] || ! cmp -s "$req" "$dir/.installed"; then
    need python3
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
    cp "$req" "$dir/.installed"
  fi
}

node_deps() {
  need node
  if [ ! -d "$BENCH/node/node_modules/jsonrepair" ]; then
    (cd "$BENCH/node" && npm ci --no-audit --no-fund >&2)
  fi
}
