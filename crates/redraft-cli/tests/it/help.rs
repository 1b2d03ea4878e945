use crate::{output, redraft};

#[tokio::test]
async fn run_help_lists_every_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["run", "--help"]).env("COLUMNS", "100");
        c
    })
    .await;
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout, @r#"
    Ask a model, check the answer, feed back the problems, until it passes or a limit is hit

    Usage: redraft run [OPTIONS] --prompt <TEXT|@FILE> [-- <AGENT>...]

    Arguments:
      [AGENT]...  An agent command that proposes instead of a model (`{prompt}` in its arguments is
                  replaced by the prompt, which is also on its stdin and in $REDRAFT_PROMPT_FILE)

    Options:
      -p, --prompt <TEXT|@FILE>         The task: text, `@FILE` to read a file, or `-` for stdin
          --system <TEXT|@FILE>         A system message: text or `@FILE`
          --context <JSON|@FILE>        A JSON object shown to the model and to evaluators: JSON text or
                                        `@FILE`
          --schema <FILE>               Check answers against this JSON Schema file (same as `--eval
                                        schema:FILE`)
          --kind <NAME>                 A registered kind: its schema, rules and LLM check (same as
                                        `--eval kind:NAME`)
          --kinds <DIR>                 Where kinds live. By default, `kinds_dir` from the config
                                        (`./kinds`)
          --eval <DIRECTIVE>            An evaluator directive; repeat for several (all must pass, the
                                        score is the lowest): `schema:PATH`, `kind:NAME`, `exec:CMD`
                                        (`{artifact}` and `$ARTIFACT` name the artifact file),
                                        `http:URL`, `score:CRITERION` (an LLM judge), `llm:NAME` (a
                                        kind, LLM-checked)
          --artifact-ext <EXT>          The extension of the artifact file that `exec:` evaluators get
                                        (`py`, `rs`, …). By default, `json`, or `txt` with `--text`
      -m, --model <PROVIDER/MODEL>      The proposer, as `provider/model` (`openai/gpt-4o-mini`,
                                        `mock/replies.jsonl`). By default, `default_model` from the
                                        config [env: REDRAFT_MODEL=]
          --text                        Evaluate the raw text instead of extracting JSON from it
          --prompt-style <STYLE>        How the expected shape is shown to the model. By default, both
                                        [possible values: schema, example, both]
          --strategy <STRATEGY>         How the model is asked again after a rejection: `conversation`
                                        (its answer stays in the chat and the feedback follows) or
                                        `fresh` (one prompt rebuilt with the earlier attempts and their
                                        issues). By default, `strategy` from the config (conversation)
                                        [possible values: conversation, fresh]
          --no-format-check             Do not check JSON Schema `format`s (`date`, `email`, `uri`, …):
                                        they become annotations. By default, `check_formats` from the
                                        config (they are checked)
          --constrained                 Constrained decoding: also send the schema as `response_format`
                                        to an OpenAI-compatible server (OpenAI, vLLM, llama-server), so
                                        the shape comes from the decoder; every check still runs. A
                                        server that refuses it is asked again without it. By default,
                                        `constrained` from the config (on)
          --no-constrained              Do not send the schema as `response_format`: the model is only
                                        prompted for the shape
          --strict                      Check answers exactly as extracted: no schema-aligned coercion
                                        (by default `"€77.08"` where the schema asks for a number is
                                        checked as 77.08, and the change is recorded among the attempt's
                                        repairs). By default, `coerce` from the config (on)
          --max-iterations <N>          Attempts at most. By default, 3 [alias: --max-iter]
          --threshold <X>               Score at or above which an answer passes, in [0, 1]. By default,
                                        1.0 (0.9 with a scoring evaluator)
          --patience <N>                Halt after N attempts in a row that do not improve the best
                                        score. By default, off
          --max-budget <USD>            Halt before an attempt that would take spending past this many
                                        USD. Needs the model's price in the config. By default, off
          --max-wall-time <DURATION>    Halt after this long, cancelling the attempt in flight (`90s`,
                                        `5m`). By default, off
          --attempt-timeout <DURATION>  An attempt taking longer counts as an error (`timeout`). By
                                        default, 120s
          --repeat-limit <N>            Halt with `stagnation` when the same answer is given N times (0
                                        = off). By default, 2
          --temperature <T>             Sampling temperature. By default, the provider's
          --max-tokens <N>              Output token limit per attempt. By default, the provider's
          --json                        Print the whole result as JSON (artifact, history, metrics,
                                        escalation) on stdout instead of only the artifact
          --no-store                    Do not record the run in the store (`.redraft/redraft.db` by
                                        default)
          --await                       When the run would fail (its attempts ran out, stopped improving
                                        or repeated), stop it awaiting your answer instead, kept in the
                                        store: `redraft runs answer ID "text"` continues it with the
                                        answer, `redraft runs abort ID` ends it. The config's
                                        `on_escalation = "await"` does too
          --progress <WHEN>             A progress line per attempt on stderr. By default, only when
                                        stderr is a terminal [default: auto] [possible values: auto,
                                        always, never]
          --sandbox <NAME|JSON>         Run `exec:` evaluators and command proposers in this sandbox: a
                                        `[sandboxes.NAME]` from the config, or inline JSON such as
                                        '{"network": false, "cpu_seconds": 60}'
      -h, --help                        Print help
      -V, --version                     Print version

    Global options:
          --config <FILE>        Read this config file instead of ./redraft.toml;
                                 $XDG_CONFIG_HOME/redraft/redraft.toml still lies beneath it, and
                                 REDRAFT_* variables above it [env: REDRAFT_CONFIG=]
      -v, --verbose...           Log more to stderr (-v info, -vv debug). `RUST_LOG` works too
          --log-format <FORMAT>  Log lines on stderr as text (coloured only on a terminal) or json (one
                                 object per line) [env: REDRAFT_LOG_FORMAT=] [default: text] [possible
                                 values: text, json]
    "#);
}

#[tokio::test]
async fn until_help_lists_every_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["until", "--help"]).env("COLUMNS", "100");
        c
    })
    .await;
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout, @r#"
    Agent mode: run an agent, then a verifier, in this directory until the verifier passes

    Usage: redraft until [OPTIONS] --verify <CMD> -- <AGENT>...

    Arguments:
      <AGENT>...  The agent command and its arguments

    Options:
      -p, --prompt <TEXT|@FILE>         The task for the agent: text, `@FILE`, or `-` for stdin. By
                                        default, "make the verifier pass"
          --verify <CMD>                The verifier, run with `sh -c` after each iteration; exit 0
                                        means done
          --task <ID>                   The task's name, used for `.redraft/iterations/<task>/`. By
                                        default, a slug of the prompt and today's date
          --protect <GLOB>              Files the agent must not change (e.g. 'tests/**'); a change
                                        rejects the iteration and is undone. Repeat for several
          --sandbox <NAME|JSON>         Run the agent and the verifier in this sandbox: a
                                        `[sandboxes.NAME]` from the config, or inline JSON
          --max-iterations <N>          Attempts at most. By default, 3 [alias: --max-iter]
          --threshold <X>               Score at or above which an answer passes, in [0, 1]. By default,
                                        1.0 (0.9 with a scoring evaluator)
          --patience <N>                Halt after N attempts in a row that do not improve the best
                                        score. By default, off
          --max-budget <USD>            Halt before an attempt that would take spending past this many
                                        USD. Needs the model's price in the config. By default, off
          --max-wall-time <DURATION>    Halt after this long, cancelling the attempt in flight (`90s`,
                                        `5m`). By default, off
          --attempt-timeout <DURATION>  An attempt taking longer counts as an error (`timeout`). By
                                        default, 120s
          --repeat-limit <N>            Halt with `stagnation` when the same answer is given N times (0
                                        = off). By default, 2
          --temperature <T>             Sampling temperature. By default, the provider's
          --max-tokens <N>              Output token limit per attempt. By default, the provider's
          --reason <TEXT>               Why this loop may take more than 3 iterations: needed with
                                        `--max-iter` above 3, and written in decisions.md
          --on-cap <WHAT>               When the loop hits its cap (its iterations ran out, stopped
                                        improving or repeated): `fail` escalates; `ask` shows the
                                        escalation and asks you on the terminal, then goes on with your
                                        answer for as many iterations again (an empty answer stops it)
                                        [default: fail] [possible values: fail, ask]
          --decisions <FILE>            Where the loop's outcome is recorded: one dated entry appended
                                        per loop [default: decisions.md]
          --no-decisions                Do not append the loop's outcome to decisions.md
          --no-store                    Do not record the loop in the store (by default it is, like
                                        every run: `redraft runs` lists it)
          --json                        Print the whole result as JSON (artifact, history, metrics,
                                        escalation) on stdout
          --progress <WHEN>             A progress line per iteration on stderr. By default, only when
                                        stderr is a terminal [default: auto] [possible values: auto,
                                        always, never]
      -h, --help                        Print help
      -V, --version                     Print version

    Global options:
          --config <FILE>        Read this config file instead of ./redraft.toml;
                                 $XDG_CONFIG_HOME/redraft/redraft.toml still lies beneath it, and
                                 REDRAFT_* variables above it [env: REDRAFT_CONFIG=]
      -v, --verbose...           Log more to stderr (-v info, -vv debug). `RUST_LOG` works too
          --log-format <FORMAT>  Log lines on stderr as text (coloured only on a terminal) or json (one
                                 object per line) [env: REDRAFT_LOG_FORMAT=] [default: text] [possible
                                 values: text, json]
    "#);
}
