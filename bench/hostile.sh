#!/usr/bin/env bash
# Hostile answers: time and peak RSS of checking them (the `hostile_check` example of the
# redraft crate, under /usr/bin/time -v): a 2 MB model reply `[1,1,…]` against
# `{"type":"array","items":{"type":"string"}}`, and an `http:` validator answering 422 with a
# 300 MB body (announced, then not) or with 200,000 issues. Prints one line per case.
source "$(dirname "$0")/lib.sh"
need python3
echo "bench: building the hostile_check example in release" >&2
cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p redraft --example hostile_check >&2
BIN="$CARGO_TARGET_DIR/release/examples/hostile_check"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
port=18181
for mode in big bigchunked issues compact; do
  python3 "$BENCH/hostile_validator.py" "$port" "$mode" & pids+=($!)
  port=$((port + 1))
done
sleep 1
measure() {
  local name="$1"; shift
  local out
  out=$( { /usr/bin/time -v "$BIN" "$@" >/dev/null; } 2>&1 )
  local wall rss cpu line
  line=$(grep -E '^(array|http):' <<<"$out" || true)
  wall=$(grep 'Elapsed (wall clock)' <<<"$out" | awk '{print $NF}')
  cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{print u+s}' <<<"$out")
  rss=$(grep 'Maximum resident set size' <<<"$out" | awk '{print $NF}')
  printf '%-28s wall %-10s cpu %6.2fs  peak RSS %6d MB  %s\n' "$name" "$wall" "$cpu" "$((rss / 1024))" "$line"
}
measure "2 MB [1,1,…] reply" array 1000000
measure "300 MB 422 (announced)" http http://127.0.0.1:18181/check
measure "300 MB 422 (chunked)" http http://127.0.0.1:18182/check
measure "200,000 issues (12 MB)" http http://127.0.0.1:18183/check
measure "200,000 issues, 16 MiB read" http http://127.0.0.1:18183/check 16777216
measure "200,000 issues (1 MB)" http http://127.0.0.1:18184/check
