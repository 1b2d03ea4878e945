"""Server scale driver (run by server-scale.sh): does the HTTP server keep up with the loop?

For each N in RUNS ("5000 10000"), ROUNDS (3) times, side by side, against one fake
OpenAI-compatible provider answering the valid invoice on the first call after DELAY_MS (200):

* provider alone: `http-floor --concurrent --requests-per-run 1`, N chat completions from
  reqwest alone;
* library alone: `loop-bench --concurrent`, N runs of one attempt in one process;
* HTTP, SQLite: `redraft serve` in a fresh temporary directory (the store on, as by default:
  `.redraft/redraft.db`), `[server] max_concurrent_runs = N`, and `http-load`: N concurrent
  `POST /v1/iterate`, released together;
* HTTP, PostgreSQL, 2 workers (when DATABASE_URL is set and this redraft has a `worker`
  command): `redraft serve --no-worker` + 2 `redraft worker --concurrency N`, all on
  DATABASE_URL, the same requests. Each round has a schema of its own (created empty, dropped
  after), as each SQLite round has a fresh directory: what a burst costs does not depend on how
  many rounds ran before it.

Every request must answer 200 with a succeeded result of one attempt, and the store must then
hold N succeeded runs and N attempts; anything else is lost. The server's RSS is read from
/proc: when it has started and is idle (cold), then after WARMUP (20) runs through the same
path and idle again, with more warm-up runs until every worker has executed some (the start:
the code the path runs is paged in, as in any server that has served one request), its peak (VmHWM) and after the burst, once it has been idle (no run in
flight, under 5% of a core) for IDLE_S (5) seconds, polled, and again IDLE_LATE_S (65) seconds
after that: past the provider connection pool's idle timeout (30 s) and its next sweep, which
close the connections the burst opened and free their buffers. The target is judged on the
later reading against the start; the anonymous part of RSS (the heaps, without the program's
mapped code) is recorded beside every reading.
TIMEOUT_S (300) bounds each request. PERF=1 profiles the redraft processes during each burst
(`perf record`) and reports the symbols taking the most CPU.
"""

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from benchlib import BIN, LOOP, median, machine, spawn_measured, table, write_results

SIZES = [int(x) for x in os.environ.get("RUNS", "5000 10000").split()]
DELAY_MS = int(os.environ.get("DELAY_MS", "200"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
TIMEOUT_S = int(os.environ.get("TIMEOUT_S", "300"))
IDLE_S = float(os.environ.get("IDLE_S", "5"))
IDLE_LATE_S = float(os.environ.get("IDLE_LATE_S", "65"))
WARMUP = int(os.environ.get("WARMUP", "20"))
DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDRAFT = BIN / "redraft"
GIB_KIB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")
WORKERS = 2
ROUND_IDS = itertools.count(1)
PERF = os.environ.get("PERF") == "1" and shutil.which("perf") is not None

PROVIDER, LIBRARY, HTTP_SQLITE, HTTP_PG = ("provider alone", "library alone", "HTTP, SQLite",
                                            "HTTP, PostgreSQL, 2 workers")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- processes: /proc ------------------------------------------------------------------------

def proc_status(pid):
    """VmRSS, VmHWM and RssAnon of pid, KiB."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon"):
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def proc_cpu(pid):
    """user+sys CPU seconds of pid so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def get_json(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def get_text(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metric(text, name, labels=None):
    """Sum of a Prometheus family's samples (those whose labels include `labels`)."""
    total, found = 0.0, False
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+(\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in (labels or {}).items()):
            total, found = total + float(m.group(2)), True
    return total if found else None


# ---- the fake provider ----------------------------------------------------------------------

class Provider:
    """fake-openai --valid-first: every call answers the valid invoice after DELAY_MS."""

    def __init__(self):
        self.p = subprocess.Popen([str(BIN / "fake-openai"), "--delay-ms", str(DELAY_MS), "--valid-first"],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline().split()
        if not line or line[0] != "LISTENING":
            sys.exit("fake-openai did not start")
        self.url = line[1]
        self.root = self.url.removesuffix("/v1")

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(self.root + "/reset", method="POST")).read()

    def stats(self, timeout=5.0):
        return get_json(self.root + "/stats", timeout)

    def stop(self):
        self.p.terminate()
        self.p.wait()


# ---- the redraft processes ------------------------------------------------------------------

def clean_env(home):
    """The server's environment: nothing of the caller's redraft or provider settings."""
    env = {"PATH": os.environ["PATH"], "HOME": home, "XDG_CONFIG_HOME": home, "FAKE_API_KEY": "sk-bench",
           "LANG": "C.UTF-8"}
    return env


def write_config(tmp, provider_url, n, database_url=None):
    lines = ['default_model = "fake/fake"']
    if database_url:
        lines.append(f"database_url = {json.dumps(database_url)}")
    lines += ["", "[providers.fake]", 'type = "openai"', f'base_url = "{provider_url}"',
              'api_key_env = "FAKE_API_KEY"', "", "[server]", f"max_concurrent_runs = {n}",
              "", "[queue]", f"max_queued_runs = {2 * n}", 'max_wait = "300s"']
    (Path(tmp) / "redraft.toml").write_text("\n".join(lines) + "\n")


def has_workers():
    """Whether this redraft has `redraft worker` and `redraft serve --no-worker`."""
    try:
        w = subprocess.run([str(REDRAFT), "worker", "--help"], capture_output=True, text=True, timeout=30)
        s = subprocess.run([str(REDRAFT), "serve", "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return w.returncode == 0 and "--no-worker" in s.stdout


class Proc:
    """A redraft process with its stderr in a file."""

    def __init__(self, name, args, tmp):
        self.name = name
        self.log_path = Path(tmp) / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.p = subprocess.Popen([str(REDRAFT)] + args, cwd=tmp, env=clean_env(tmp), stdout=subprocess.DEVNULL,
                                  stderr=self.log, start_new_session=True)
        self.pid = self.p.pid

    def wait_line(self, pattern, limit=60):
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            m = re.search(pattern, self.log_path.read_text(errors="replace"))
            if m:
                return m
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit(f"{self.name} did not start ({self.log_path}):\n{self.log_path.read_text(errors='replace')[-3000:]}")

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()

    def log_summary(self):
        """The process's ERROR and WARN lines grouped by message, each group with its count and,
        for its numeric fields (`acquired_after_secs=2.5`), their median and maximum."""
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.log_path.read_text(errors="replace"))
        lines = text.splitlines()
        groups = {}
        for ln in lines:
            m = re.search(r"\b(ERROR|WARN)\b\s+(.*)$", ln)
            if not m:
                continue
            rest = m.group(2)
            fields = dict(re.findall(r"(\w+)=(\S+)", rest))
            message = re.split(r"\s\w+=", rest, maxsplit=1)[0].strip()
            g = groups.setdefault(f"{m.group(1)} {message}", {"count": 0, "numbers": {}})
            g["count"] += 1
            for k, v in fields.items():
                try:
                    number = float(v)
                except ValueError:
                    continue
                g["numbers"].setdefault(k, []).append(number)
        for g in groups.values():
            g["numbers"] = {k: {"median": median(v), "max": max(v)} for k, v in g["numbers"].items()}
        return {"lines": len(lines), "messages": groups}


def wait_idle(procs, metrics_url, quiet_s, limit=300, poll=0.25):
    """Poll until every process has used under 5% of a core, and (with metrics_url) no run is in
    flight, for quiet_s seconds in a row. Returns (seconds waited, idle reached)."""
    t0 = time.monotonic()
    last = sum(proc_cpu(p.pid) for p in procs)
    since = None
    while time.monotonic() - t0 < limit:
        time.sleep(poll)
        now = time.monotonic()
        cpu = sum(proc_cpu(p.pid) for p in procs)
        busy = (cpu - last) > 0.05 * poll
        last = cpu
        if not busy and metrics_url:
            try:
                busy = (metric(get_text(metrics_url, timeout=5), "redraft_runs_in_flight") or 0) > 0
            except (OSError, urllib.error.URLError):
                busy = True
        if busy:
            since = None
        elif since is None:
            since = now
        elif now - since >= quiet_s:
            return now - t0, True
    return time.monotonic() - t0, False


class Sampler(threading.Thread):
    """During the burst, every 0.25 s: the provider's requests and requests in flight, and the
    redraft processes' RSS and CPU. What the timeline shows: when the last run reached the
    provider, against when the last answer came back."""

    def __init__(self, provider, procs):
        super().__init__(daemon=True)
        self.provider, self.procs = provider, procs
        self.samples, self.stop_flag = [], threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.stop_flag.is_set():
            t = time.monotonic() - self.t0
            try:
                st = self.provider.stats(timeout=1.0)
                req, inflight = st["requests"], st["in_flight"]
            except (OSError, urllib.error.URLError, KeyError):
                req = inflight = None
            rss = sum(proc_status(p.pid).get("VmRSS", 0) for p in self.procs)
            cpu = sum(proc_cpu(p.pid) for p in self.procs)
            self.samples.append({"t": round(t, 3), "provider_requests": req, "provider_in_flight": inflight,
                                 "rss_kib": rss, "cpu_s": cpu})
            self.stop_flag.wait(0.25)

    def finish(self):
        self.stop_flag.set()
        self.join()
        return self.samples


class Profiler:
    """PERF=1: `perf record` of the redraft processes during the burst; the symbols taking the
    most CPU (self time), by binary."""

    def __init__(self, procs, tmp):
        self.data = Path(tmp) / "perf.data"
        self.p = subprocess.Popen(["perf", "record", "-F", "499", "-o", str(self.data), "-p",
                                   ",".join(str(p.pid) for p in procs)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def finish(self, top=25):
        self.p.send_signal(signal.SIGINT)
        self.p.wait()
        out = subprocess.run(["perf", "report", "-i", str(self.data), "--no-children", "--sort", "dso,symbol",
                              "--stdio"], capture_output=True, text=True).stdout
        rows = []
        for line in out.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*\S)", line)
            if m:
                rows.append({"percent": float(m.group(1)), "dso": m.group(2), "kernel": m.group(3) == "k",
                             "symbol": re.split(r"\s{2,}", m.group(4))[0]})
        return rows[:top]


def run_load(url, n, timeout_s=None):
    body = Path(tempfile.gettempdir()) / f"redraft-server-scale-{os.getpid()}.json"
    body.write_text(json.dumps({"prompt": (LOOP / "prompt.txt").read_text(),
                                "schema": json.loads((LOOP / "schema.json").read_text()),
                                "model": "fake/fake", "max_iterations": 3}))
    try:
        code, out, err, cpu, rss = spawn_measured([str(BIN / "http-load"), "--url", url, "--body", str(body),
                                                   "--requests", str(n), "--timeout-s", str(timeout_s or TIMEOUT_S),
                                                   "--expect-attempts", "1"])
    finally:
        body.unlink(missing_ok=True)
    if code != 0:
        sys.exit(f"http-load exited {code}:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def sqlite_counts(tmp, since_ms):
    import sqlite3
    db = Path(tmp) / ".redraft" / "redraft.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        # the burst's runs: those created after the warm-up
        states = dict(con.execute("SELECT state, count(*) FROM runs WHERE created_at >= ? GROUP BY state",
                                  (since_ms,)).fetchall())
        attempts = con.execute("SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id "
                               "WHERE r.created_at >= ?", (since_ms,)).fetchone()[0]
        accepted = con.execute("SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id "
                               "WHERE r.created_at >= ? AND a.status = 'accepted'", (since_ms,)).fetchone()[0]
    finally:
        con.close()
    return {"runs": states, "attempts": attempts, "accepted_attempts": accepted}


def store_bytes(tmp):
    d = Path(tmp) / ".redraft"
    return sum(f.stat().st_size for f in d.glob("redraft.db*")) if d.is_dir() else 0


def pg_query(schema, sql):
    """Rows of `sql` run by psql on DATABASE_URL, in `schema`."""
    env = dict(os.environ, PGOPTIONS=f"-c search_path={schema}")
    out = subprocess.run(["psql", DATABASE_URL, "-AtX", "-c", sql], capture_output=True, text=True, timeout=120,
                         env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [ln.split("|") for ln in out.stdout.strip().splitlines() if ln]


def pg_schema_url(schema):
    """DATABASE_URL with the store in `schema`."""
    sep = "&" if "?" in DATABASE_URL else "?"
    return f"{DATABASE_URL}{sep}options[search_path]={schema}"


def pg_counts(schema, since_ms):
    def q(sql):
        return pg_query(schema, sql)
    states = {s: int(c) for s, c in q(f"SELECT state, count(*) FROM runs WHERE created_at >= {since_ms} GROUP BY state")}
    attempts = int(q(f"SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.created_at >= {since_ms}")[0][0])
    accepted = int(q("SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id "
                     f"WHERE r.created_at >= {since_ms} AND a.status = 'accepted'")[0][0])
    return {"runs": states, "attempts": attempts, "accepted_attempts": accepted}


def http_round(provider, n, postgres):
    """One burst through `redraft serve` (and workers): the load client's figures, the server's
    memory, the store's counts."""
    tmp = tempfile.mkdtemp(prefix="redraft-server-scale-")
    procs = []
    schema = f"redraft_server_scale_{os.getpid()}_{n}_{next(ROUND_IDS)}" if postgres else None
    if postgres:
        pg_query("public", f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")
    try:
        write_config(tmp, provider.url, n, pg_schema_url(schema) if postgres else None)
        server = Proc("serve", ["serve", "--addr", "127.0.0.1:0"] + (["--no-worker"] if postgres else []), tmp)
        procs.append(server)
        addr = server.wait_line(r"listening on (http://\S+)").group(1)
        if postgres:
            for i in range(WORKERS):
                procs.append(Proc(f"worker-{i + 1}", ["worker", "--concurrency", str(n)], tmp))
        metrics_url = addr + "/metrics"
        wait_s, _ = wait_idle(procs, metrics_url, quiet_s=1.0, limit=60)
        cold = [proc_status(p.pid) for p in procs]
        warmed = 0
        for _ in range(10 if WARMUP else 0):
            warm = run_load(addr + "/v1/iterate", WARMUP, timeout_s=60)
            if warm["succeeded"] != WARMUP:
                sys.exit(f"the warm-up of {WARMUP} runs did not all succeed: {warm}")
            warmed += WARMUP
            # every worker must have run some: one left cold would make its start reading small
            if not postgres or int(pg_query(schema, "SELECT count(DISTINCT worker_id) FROM runs")[0][0]) >= WORKERS:
                break
        wait_idle(procs, metrics_url, quiet_s=1.0, limit=60)
        since_ms = int(time.time() * 1000)
        start = [proc_status(p.pid) for p in procs]
        before = [x.get("VmRSS", 0) for x in start]
        cpu_before = [proc_cpu(p.pid) for p in procs]
        provider.reset()
        profiler = Profiler(procs, tmp) if PERF else None
        sampler = Sampler(provider, procs)
        sampler.start()
        load = run_load(addr + "/v1/iterate", n)
        timeline = sampler.finish()
        profile = profiler.finish() if profiler else None
        cpu_burst = [proc_cpu(p.pid) - c for p, c in zip(procs, cpu_before)]
        stats = provider.stats()
        try:
            metrics = get_text(metrics_url, timeout=30)
        except (OSError, urllib.error.URLError) as e:
            metrics = f"# unavailable: {e}"
        idle_wait, idle_reached = wait_idle(procs, metrics_url, quiet_s=IDLE_S)
        after = [proc_status(p.pid) for p in procs]
        late_wait, _ = wait_idle(procs, metrics_url, quiet_s=IDLE_LATE_S, limit=IDLE_LATE_S + 300)
        late_status = [proc_status(p.pid) for p in procs]
        late = [x.get("VmRSS", 0) for x in late_status]
        alive = [p.alive() for p in procs]
        db_bytes = 0 if postgres else store_bytes(tmp)
        for p in procs:
            p.stop()
        try:
            counts = pg_counts(schema, since_ms) if postgres else sqlite_counts(tmp, since_ms)
        except Exception as e:  # noqa: BLE001 — reported, not fatal
            counts = {"error": str(e)}
        logs = {p.name: p.log_summary() for p in procs}
    finally:
        for p in procs:
            if p.alive():
                p.p.kill()
                p.p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if postgres:
            try:
                pg_query("public", f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            except RuntimeError as e:
                log(f"could not drop the schema {schema}: {e}")

    reached = stats["requests"]
    last_reach = next((s["t"] for s in timeline if (s["provider_requests"] or 0) >= reached), None)
    runs_ok = counts.get("runs", {}).get("succeeded", 0)
    stored_ok = (runs_ok == n and sum(counts.get("runs", {}).values()) == n and counts.get("attempts") == n)
    # the store holds exactly what was answered: one succeeded run and one attempt per 200
    store_matches = (runs_ok == load["succeeded"] and sum(counts.get("runs", {}).values()) == load["succeeded"]
                     and counts.get("attempts") == load["succeeded"])
    dur_sum = metric(metrics, "redraft_attempt_duration_seconds_sum")
    dur_n = metric(metrics, "redraft_attempt_duration_seconds_count")
    return {
        "wall_s": load["wall_s"], "latency_s": load["latency_s"], "succeeded": load["succeeded"],
        "lost": load["lost"], "outcomes": load["outcomes"], "error_samples": load["error_samples"],
        "attempts": load["attempts"], "load_cpu_s": load["load_cpu_s"], "load_max_rss_kib": load["max_rss_kib"],
        "store": counts, "store_bytes": db_bytes, "stored_ok": stored_ok, "store_matches_answers": store_matches,
        "latency_s_by_outcome": load["latency_s_by_outcome"],
        "nothing_lost": load["succeeded"] == n and load["lost"] == 0 and stored_ok and all(alive),
        "processes": [p.name for p in procs], "alive_after": alive,
        "rss_cold_kib": sum(x.get("VmRSS", 0) for x in cold), "anon_cold_kib": sum(x.get("RssAnon", 0) for x in cold),
        "warmup_runs": warmed, "anon_start_kib": sum(x.get("RssAnon", 0) for x in start),
        "anon_idle_late_kib": sum(x.get("RssAnon", 0) for x in late_status),
        "rss_start_kib": sum(before), "rss_start_kib_each": before, "start_idle_wait_s": wait_s,
        "peak_rss_kib": sum(a.get("VmHWM", 0) for a in after), "peak_rss_kib_each": [a.get("VmHWM", 0) for a in after],
        "rss_idle_kib": sum(a.get("VmRSS", 0) for a in after), "rss_idle_kib_each": [a.get("VmRSS", 0) for a in after],
        "idle_wait_s": idle_wait, "idle_reached": idle_reached,
        "rss_idle_late_kib": sum(late), "rss_idle_late_kib_each": late, "idle_late_wait_s": idle_wait + late_wait,
        "server_cpu_s": sum(cpu_burst), "server_cpu_s_each": cpu_burst,
        "provider_requests": stats["requests"], "provider_max_in_flight": stats["max_in_flight"],
        "last_run_at_provider_s": last_reach,
        "attempt_mean_s": (dur_sum / dur_n) if dur_sum is not None and dur_n else None,
        "metrics_runs_succeeded": metric(metrics, "redraft_runs_total", {"status": "succeeded"}),
        "logs": logs, "profile": profile, "timeline": timeline,
    }


def direct_round(provider, n, name):
    common = ["--base-url", provider.url, "--prompt", str(LOOP / "prompt.txt"), "--runs", str(n), "--concurrent"]
    cmd = ([str(BIN / "http-floor"), "--requests-per-run", "1"] + common if name == PROVIDER else
           [str(BIN / "loop-bench"), "--schema", str(LOOP / "schema.json"), "--max-iterations", "3",
            "--request-timeout-s", str(TIMEOUT_S)] + common)
    provider.reset()
    code, out, err, cpu, rss = spawn_measured(cmd)
    if code != 0:
        sys.exit(f"{name} exited {code}:\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    st = provider.stats()
    ok = (res["runs"] == n and res["succeeded"] == n and res["attempts"] == n and res["errors"] == 0
          and st["requests"] == n)
    return {"wall_s": res["loop_wall_s"], "process_cpu_s": cpu, "max_rss_kib": rss, "succeeded": res["succeeded"],
            "attempts": res["attempts"], "errors": res["errors"], "sequences": res["sequences"],
            "provider_requests": st["requests"], "provider_max_in_flight": st["max_in_flight"], "nothing_lost": ok}


def describe(name, n, x):
    if name in (PROVIDER, LIBRARY):
        return f"{x['wall_s']:.2f} s, {x['succeeded']}/{n} succeeded, {x['max_rss_kib'] / 1024:.0f} MiB"
    return (f"{x['wall_s']:.2f} s (p50 {x['latency_s']['p50']:.2f} s, p99 {x['latency_s']['p99']:.2f} s), "
            f"{x['succeeded']}/{n} succeeded, lost {x['lost']} {x['outcomes']}, store {x['store']}, RSS "
            f"{x['rss_cold_kib'] / 1024:.0f} cold, {x['rss_start_kib'] / 1024:.0f} after {x['warmup_runs']} runs → peak {x['peak_rss_kib'] / 1024:.0f} → idle "
            f"{x['rss_idle_kib'] / 1024:.0f} MiB (idle after {x['idle_wait_s']:.1f} s) → "
            f"{x['rss_idle_late_kib'] / 1024:.0f} MiB (after {x['idle_late_wait_s']:.0f} s), server CPU "
            f"{x['server_cpu_s']:.1f} s")


def mib(kib):
    return f"{kib / 1024:.0f}"


def report(info, results, pg_note):
    md = [f"N concurrent runs of one attempt each (the provider answers the valid invoice first), "
          f"{DELAY_MS} ms per provider reply (floor: {DELAY_MS / 1000:.1f} s), {ROUNDS} round(s), medians; "
          f"per-request timeout {TIMEOUT_S} s; open-files limit {info['open_files_limit']}; commit "
          f"`{info['commit']}`.", ""]
    if pg_note:
        md += [f"{HTTP_PG}: {pg_note}", ""]
    if PERF:
        md += ["The HTTP rounds ran under `perf record` (PERF=1, 499 samples a second), which costs a few percent.",
               ""]
    for n, by in results.items():
        md.append(f"### N = {n:,}")
        md.append("")
        rows = []
        for name, rs in by.items():
            if not rs:
                continue
            for i, x in enumerate(rs):
                if name in (PROVIDER, LIBRARY):
                    rows.append([name, i + 1, f"{x['wall_s']:.2f}", "", "", f"{x['succeeded']:,}/{n:,}", "",
                                 f"{x['process_cpu_s']:.1f} (client)", f"{mib(x['max_rss_kib'])} (client)", "", "", "",
                                 "yes" if x["nothing_lost"] else "NO"])
                else:
                    lat = x["latency_s"]
                    st = x["store"]
                    stored = (f"{st.get('runs', {}).get('succeeded', 0):,} / {st.get('attempts', 0):,}"
                              if "error" not in st else "error")
                    rows.append([name, i + 1, f"{x['wall_s']:.2f}", f"{lat['p50']:.2f}",
                                 f"{lat['p90']:.2f} / {lat['p99']:.2f}", f"{x['succeeded']:,}/{n:,}", stored,
                                 f"{x['server_cpu_s']:.1f}", mib(x["peak_rss_kib"]),
                                 f"{mib(x['rss_cold_kib'])} → {mib(x['rss_start_kib'])} ({x['warmup_runs']} runs)",
                                 f"{mib(x['rss_idle_kib'])} ({x['idle_wait_s']:.0f} s) → "
                                 f"{mib(x['rss_idle_late_kib'])} ({x['idle_late_wait_s']:.0f} s)",
                                 f"{mib(x['anon_cold_kib'])} → {mib(x['anon_start_kib'])} → "
                                 f"{mib(x['anon_idle_late_kib'])}",
                                 "yes" if x["nothing_lost"] else "NO"])
        md.append(table(["path", "round", "wall s", "p50 s", "p90 / p99 s", "succeeded", "store: succeeded / attempts",
                         "CPU s", "peak RSS MiB", "RSS cold → start (after the warm-up runs) MiB",
                         "idle RSS after MiB (waited)", "anonymous RSS cold → start → idle late MiB", "nothing lost"],
                        rows))
        md.append("")
        med = {name: median([x["wall_s"] for x in rs]) for name, rs in by.items() if rs}
        prov, lib = med.get(PROVIDER), med.get(LIBRARY)
        ratio_rows = [["library / provider alone", f"{lib / prov:.2f}×"]]
        target_rows = []
        for name in (HTTP_SQLITE, HTTP_PG):
            rs = by.get(name)
            if not rs:
                continue
            h = med[name]
            ratio_rows += [[f"{name} / library", f"{h / lib:.2f}×"], [f"{name} / provider alone", f"{h / prov:.2f}×"]]
            peak = max(x["peak_rss_kib"] for x in rs)
            worst = max(rs, key=lambda x: x["peak_rss_kib"])
            ran = worst["store"].get("runs", {}).get("succeeded", 0) if "error" not in worst["store"] else 0
            peak_result = ("not met" if peak >= GIB_KIB else "met" if ran >= n
                           else f"not shown: only {ran:,} of the {n:,} runs ran in that round")
            growth = max(x["rss_idle_late_kib"] / max(x["rss_start_kib"], 1) for x in rs)
            cold_growth = max(x["rss_idle_late_kib"] / max(x["rss_cold_kib"], 1) for x in rs)
            lost = sum(n - x["succeeded"] for x in rs)
            every = all(x["nothing_lost"] for x in rs)
            what = "the server and its workers, summed" if name == HTTP_PG else "the server"
            target_rows += [
                [f"{name}: wall ≤ 1.5× the library's", f"{h:.2f} s vs {lib:.2f} s = {h / lib:.2f}× (medians)",
                 "met" if h <= 1.5 * lib else "not met"],
                [f"{name}: peak RSS < 1 GiB ({what})", f"{mib(peak)} MiB in the worst round",
                 peak_result],
                [f"{name}: idle RSS after the burst ≤ 1.5× the start (after {IDLE_LATE_S:.0f} s more)",
                 f"{growth:.2f}× in the worst round ({cold_growth:.2f}× the cold start)",
                 "met" if growth <= 1.5 else "not met"],
                [f"{name}: nothing lost (every answer 200 + succeeded; the store: {n:,} succeeded runs, "
                 f"{n:,} attempts)", "every round" if every else f"{lost:,} requests lost over the rounds",
                 "met" if every else "not met"],
            ]
        rate_rows = [[name, f"{median([x['succeeded'] / x['wall_s'] for x in rs]):,.0f}"]
                     for name, rs in by.items() if rs]
        md.append(table(["wall time ratio (medians)", ""], ratio_rows))
        md.append("")
        md.append(table(["path", "succeeded runs per second of wall time (median)"], rate_rows))
        md.append("")
        if target_rows:
            md.append(table(["target", "measured", "result"], target_rows))
            md.append("")
        for name in (HTTP_SQLITE, HTTP_PG):
            rs = by.get(name)
            if not rs:
                continue
            x = sorted(rs, key=lambda y: y["wall_s"])[len(rs) // 2]
            reach = x["last_run_at_provider_s"]
            lib_cpu = median([y["process_cpu_s"] for y in by[LIBRARY]])
            text = (f"{name}, where the time goes (the median round): {x['provider_requests']:,} of the {n:,} runs "
                    f"reached the provider, the last "
                    + (f"{reach:.1f} s after the release" if reach is not None else "at an unknown time")
                    + f" (at most {x['provider_max_in_flight']:,} calls in flight there at once); the last answer "
                    f"came back at {x['wall_s']:.1f} s. "
                    + (f"Attempts took {x['attempt_mean_s']:.2f} s on average inside the server (its /metrics) "
                       f"against the provider's {DELAY_MS / 1000:.1f} s. " if x["attempt_mean_s"] is not None else
                       "The server's /metrics counted no attempt (the workers made them). ")
                    + ("The server and its workers" if name == HTTP_PG else "The server")
                    + f" used {x['server_cpu_s']:.1f} s of CPU for the burst, "
                    f"{1e3 * x['server_cpu_s'] / max(x['provider_requests'], 1):.1f} ms per run that reached the "
                    f"provider, against {1e3 * lib_cpu / n:.2f} ms per run for the whole library process (median); "
                    f"the load client used {x['load_cpu_s']:.1f} s. The wall time is when the last request ended, "
                    "answered or lost.")
            if x["store_bytes"]:
                text += f" The store ended at {x['store_bytes'] / 2**20:.0f} MiB."
            lost = {k: v for k, v in x["outcomes"].items() if k != "succeeded"}
            if lost:
                spans = x["latency_s_by_outcome"]
                text += " Lost: " + ", ".join(
                    f"{v:,} `{k}` (after {spans[k]['min']:.1f}–{spans[k]['max']:.1f} s)" for k, v in lost.items()) + "."
                stored = x["store"].get("runs", {}).get("succeeded", 0)
                if x["store_matches_answers"]:
                    text += " The store holds exactly the runs that were answered (none of the lost ones began)."
                elif stored > x["succeeded"]:
                    text += (f" The store holds {stored:,} succeeded runs: {stored - x['succeeded']:,} ran to the end "
                             "but their answers never reached the client.")
            for proc, lg in x["logs"].items():
                during = {m: g for m, g in lg["messages"].items() if "shutting down" not in m}
                for msg, g in sorted(during.items(), key=lambda kv: -kv[1]["count"])[:3]:
                    nums = "; ".join(f"{k} median {v['median']:.2f}, max {v['max']:.2f}"
                                     for k, v in g["numbers"].items())
                    text += f" `{proc}` logged {g['count']:,}× \"{msg}\"" + (f" ({nums})" if nums else "") + "."
            md.append(text)
            md.append("")
            if x.get("profile"):
                md.append(f"{name}: the symbols taking the most CPU in that round (`perf`, self time):")
                md.append("")
                md.append(table(["% of samples", "binary", "symbol"],
                                [[f"{r['percent']:.1f}", r["dso"], f"`{r['symbol'][:90]}`"]
                                 for r in x["profile"][:12]]))
                md.append("")
    return "\n".join(md)


def main():
    import resource
    info = machine()
    info["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=Path(__file__).parent).stdout.strip() or "?"
    pg_note = None
    postgres = False
    if not DATABASE_URL:
        pg_note = "skipped: DATABASE_URL is not set"
    elif not has_workers():
        pg_note = "skipped: this redraft has no `worker` command (or `serve` has no `--no-worker`)"
    elif not shutil.which("psql"):
        pg_note = "skipped: psql is needed to count the runs in PostgreSQL"
    else:
        postgres = True
    if pg_note:
        log(f"{HTTP_PG}: {pg_note}")
    provider = Provider()
    results = {}
    try:
        for n in SIZES:
            paths = [PROVIDER, LIBRARY, HTTP_SQLITE] + ([HTTP_PG] if postgres else [])
            by = results.setdefault(n, {p: [] for p in paths})
            for r in range(ROUNDS):
                for name in paths:
                    if name in (PROVIDER, LIBRARY):
                        x = direct_round(provider, n, name)
                    else:
                        x = http_round(provider, n, postgres=(name == HTTP_PG))
                    by[name].append(x)
                    log(f"N={n} round {r + 1}/{ROUNDS} {name}: {describe(name, n, x)}")
    finally:
        provider.stop()
    md = report(info, results, pg_note)
    write_results("server-scale", {"machine": info, "runs": SIZES, "delay_ms": DELAY_MS, "rounds": ROUNDS,
                                   "timeout_s": TIMEOUT_S, "idle_s": IDLE_S, "idle_late_s": IDLE_LATE_S, "postgres": pg_note or "measured",
                                   "results": {str(n): by for n, by in results.items()}}, md)


if __name__ == "__main__":
    main()
