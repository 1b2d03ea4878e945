//! The workspace is hostile: git configuration an agent writes in its working directory — a
//! clean filter, a textconv driver, `core.fsmonitor`, hooks (in `.git/hooks` or through
//! `core.hooksPath`), `diff.external`, a config pulled in by `include.path` — is never run by
//! redraft, sandbox or not. Redraft takes its snapshots and diffs itself; it starts no program
//! that reads the workspace's configuration. And a link the agent puts where redraft writes its
//! reports or `decisions.md` — a symlink or a hard link to a file outside, a linked directory —
//! is replaced, never written through.

use std::path::Path;

use redraft_testkit::processes::{live_marked, token};

use super::protect::{CHECK, Repo, protected_project, skip};
use crate::{output, redraft, write};

/// What the agent writes as `.git/payload.sh`: it marks `outside` and starts a sleeper carrying
/// `token`. As a filter it passes its input through; as a textconv driver, the file named.
fn payload(outside: &Path, token: &str) -> String {
    format!(
        "#!/bin/sh\necho ran >> '{}/marker'\nsetsid sleep {token} >/dev/null 2>&1 </dev/null &\ncase \"$1\" in\n  '') cat ;;\n  *) [ -f \"$1\" ] && cat \"$1\" ;;\nesac\nexit 0\n",
        outside.display()
    )
}

/// An agent that, on its first turn, writes the payload and the git configuration `setup` that
/// points at it (`$P`, its absolute path), then fixes `calc.sh` on its second.
fn agent(outside: &Path, token: &str, setup: &str) -> String {
    format!(
        "#!/bin/sh\ncat > /dev/null\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\ncat > .git/payload.sh <<'PAYLOAD'\n{}PAYLOAD\nchmod 755 .git/payload.sh\nP=\"$PWD/.git/payload.sh\"\n{setup}\nelse\n  echo 'echo $(( $1 + $2 ))' > calc.sh\nfi\n",
        payload(outside, token)
    )
}

/// Run a loop whose agent configures git to run a program on `git add`, `git diff` or reading
/// the index; then check that nothing ran it: no mark outside the working directory, no process.
async fn configuration_is_never_run(test: &str, setup: &str, sandbox: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    if protected_project(test, dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    if sandbox.is_some() && !redraft_sandbox::bwrap_available() {
        skip(test, "`bwrap` is missing or cannot create a sandbox here");
        return;
    }
    let token = token();
    // Inside the working directory: a sandbox with a read-only root hides a private /tmp.
    let script = write(dir.path(), "agent.sh", &agent(outside.path(), &token, setup));
    let mut cmd = redraft(dir.path());
    cmd.args(["until", "--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**"]);
    if let Some(sandbox) = sandbox {
        cmd.args(["--sandbox", sandbox]);
    }
    cmd.arg("--").arg("sh").arg(&script);
    let out = output(cmd).await;

    let marked = std::fs::read_to_string(outside.path().join("marker")).unwrap_or_default();
    assert_eq!(marked, "", "{test}: a program the agent configured ran outside its turn\n{}", out.stderr);
    let started = live_marked(&token);
    assert!(started.is_empty(), "{test}: a process the agent's configuration started is running: {started:?}");
    assert!(dir.path().join(".git/payload.sh").is_file(), "{test}: the agent wrote its payload\n{}", out.stderr);
    assert_eq!(out.code, 0, "{test}: the honest second iteration passes\n{}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{test}: {}", out.stderr);
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
    let second = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/2.md")).unwrap();
    assert!(second.contains("-echo 0\n+echo $(( $1 + $2 ))"), "{test}: the diff is still shown: {second}");
}

const CLEAN_FILTER: &str = "echo '* filter=x' > .gitattributes\ngit config filter.x.clean \"sh $P\"";
const PROCESS_FILTER: &str = "echo '* filter=x' > .gitattributes\ngit config filter.x.process \"sh $P\"";
const TEXTCONV: &str = "echo '* diff=x' > .gitattributes\ngit config diff.x.textconv \"sh $P\"";
const EXTERNAL_DIFF: &str = "git config diff.external \"$P\"";
const FSMONITOR: &str = "git config core.fsmonitor \"$P\"";
const HOOK: &str = "cp \"$P\" .git/hooks/post-index-change\nchmod 755 .git/hooks/post-index-change";
const HOOKS_PATH: &str = "mkdir -p .githooks\ncp \"$P\" .githooks/post-index-change\nchmod 755 .githooks/post-index-change\ngit config core.hooksPath .githooks";
const INCLUDE: &str = "printf '[filter \"x\"]\\n\\tclean = sh %s\\n' \"$P\" > .git/more.cfg\necho '* filter=x' > .gitattributes\ngit config include.path more.cfg";

macro_rules! configuration_cases {
    ($($name:ident: $setup:expr, $sandbox:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            configuration_is_never_run(stringify!($name), $setup, $sandbox).await;
        }
    )*};
}

configuration_cases! {
    a_clean_filter_the_agent_configures_never_runs: CLEAN_FILTER, None;
    a_clean_filter_never_runs_outside_the_sandbox: CLEAN_FILTER, Some(r#"{"network":false,"read_only_root":true}"#);
    a_process_filter_the_agent_configures_never_runs: PROCESS_FILTER, None;
    a_textconv_driver_the_agent_configures_never_runs: TEXTCONV, None;
    an_external_diff_the_agent_configures_never_runs: EXTERNAL_DIFF, None;
    an_fsmonitor_the_agent_configures_never_runs: FSMONITOR, None;
    a_hook_the_agent_installs_never_runs: HOOK, None;
    a_hooks_path_the_agent_configures_never_runs: HOOKS_PATH, None;
    a_config_the_agent_includes_never_runs: INCLUDE, None;
}

/// Run a loop whose agent, on its first turn, puts a link where redraft writes its reports or
/// `decisions.md` next (`$PROMPTS/victim` is a file outside the working directory, and
/// `$PROMPTS/elsewhere/` a directory); then check that nothing outside was written, and that the
/// reports are where they belong.
async fn reports_stay_inside(test: &str, link: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project(test, dir.path(), Repo::Plain).unwrap();
    write(prompts.path(), "victim", "precious\n");
    std::fs::create_dir(prompts.path().join("elsewhere")).unwrap();
    let agent = super::protect::cheat_then_fix(prompts.path(), link);
    let out = output(super::until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent],
    ))
    .await;
    assert_eq!(
        std::fs::read_to_string(prompts.path().join("victim")).unwrap(),
        "precious\n",
        "{test}: a file outside the working directory was written\n{}",
        out.stderr
    );
    assert_eq!(super::protect::listing(&prompts.path().join("elsewhere")), Vec::<String>::new(), "{test}");
    assert_eq!(out.code, 0, "{test}: {}", out.stderr);
    for report in [".redraft/iterations/t/1.md", ".redraft/iterations/t/final.md", "decisions.md"] {
        let meta = std::fs::symlink_metadata(dir.path().join(report)).unwrap();
        assert!(meta.is_file(), "{test}: {report} is a file of its own");
        assert_eq!(std::os::unix::fs::MetadataExt::nlink(&meta), 1, "{test}: {report} is a file of its own");
    }
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3"), "{test}: {first}");
}

const REPORT_LINK: &str = "mkdir -p .redraft/iterations/t\nln -s \"$PROMPTS/victim\" .redraft/iterations/t/1.md";
const FINAL_HARD_LINK: &str = "mkdir -p .redraft/iterations/t\nln \"$PROMPTS/victim\" .redraft/iterations/t/final.md";
const TASK_DIR_LINK: &str = "mkdir -p .redraft/iterations\nln -s \"$PROMPTS/elsewhere\" .redraft/iterations/t";
const OWN_DIR_LINK: &str = "rm -rf .redraft\nln -s \"$PROMPTS/elsewhere\" .redraft";
const DECISIONS_LINK: &str = "ln -s \"$PROMPTS/victim\" decisions.md";
const DECISIONS_HARD_LINK: &str = "ln \"$PROMPTS/victim\" decisions.md";

macro_rules! report_cases {
    ($($name:ident: $link:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            reports_stay_inside(stringify!($name), $link).await;
        }
    )*};
}

report_cases! {
    an_iteration_report_is_never_written_through_a_symlink: REPORT_LINK;
    the_final_report_is_never_written_through_a_hard_link: FINAL_HARD_LINK;
    reports_are_never_written_through_a_linked_task_directory: TASK_DIR_LINK;
    reports_are_never_written_through_a_linked_redraft_directory: OWN_DIR_LINK;
    decisions_are_never_appended_through_a_symlink: DECISIONS_LINK;
    decisions_are_never_appended_through_a_hard_link: DECISIONS_HARD_LINK;
}
