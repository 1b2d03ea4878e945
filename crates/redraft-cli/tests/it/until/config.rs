//! Redraft's own configuration in the working directory is protected in every loop, `--protect`
//! or not: an agent that writes `./redraft.toml` (absent or not), the file `--config` named, or the
//! XDG file when it lies in the working directory, would take over the next loop — its sandboxes,
//! the environment its commands get, where the store and the traces go. The change is undone
//! (the file put back byte for byte, or removed), the iteration rejected naming the file, and the
//! agent is told in its prompt. A `redraft.toml` that is a link is protected as the link.

use super::protect::{CHECK, Repo, cheat_then_fix, listing, protected_project};
use super::until;
use crate::{output, write};

/// What the user's configuration says: a sandbox the agent would like gone.
const USERS: &str = "[sandboxes.strict]\nnetwork = false\n";

/// What the agent writes instead: its sandbox lets everything through, the store and the traces go
/// where it listens.
const AGENTS: &str = "database_url = \"/tmp/agent-owned.db\"\notlp_endpoint = \"http://127.0.0.1:9\"\n\n[sandboxes.strict]\nenv = [\"OPENAI_API_KEY\"]\n";

/// Run a loop whose agent rewrites the configuration file `config` (relative to the working
/// directory; `existing`: the user has one there) on its first turn and fixes the code on its
/// second; check the file ends as it began and the first iteration is rejected naming it.
async fn configuration_is_put_back(test: &str, config: &str, existing: bool, extra: &[&str], cheat: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project(test, dir.path(), Repo::Plain).unwrap();
    let path = dir.path().join(config);
    if existing {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, USERS).unwrap();
    }
    write(prompts.path(), "agents.toml", AGENTS);
    let agent = cheat_then_fix(prompts.path(), &cheat.replace("CONFIG", config));
    let mut args = vec!["--verify", "./tests/check.sh", "--task", "t"];
    args.extend_from_slice(extra);
    args.extend(["--", "sh", &agent]);
    let out = output(until(dir.path(), prompts.path(), &args)).await;

    if existing {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file(), "{test}: `{config}` is a file again");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), USERS, "{test}: `{config}` is byte-identical");
    } else {
        assert!(std::fs::symlink_metadata(&path).is_err(), "{test}: the `{config}` the agent added is gone");
    }
    assert_eq!(std::fs::read_to_string(prompts.path().join("agents.toml")).unwrap(), AGENTS, "{test}");
    assert_eq!(out.code, 0, "{test}: the honest second iteration passes\n{}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{test}: {}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{test}: {first}");
    assert!(first.contains(&format!("`{config}` ")), "{test}: the issue names `{config}`: {first}");
    assert!(first.contains("redraft's configuration"), "{test}: the issue says what it is: {first}");
    assert!(first.contains("[protected_file_modified]"), "{test}: {first}");
    let prompt = std::fs::read_to_string(prompts.path().join("stdin-1.txt")).unwrap();
    assert!(prompt.contains(&format!("`{config}`")), "{test}: the agent is told: {prompt}");
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
}

const WRITE: &str = "mkdir -p \"$(dirname CONFIG)\"\ncp \"$PROMPTS/agents.toml\" CONFIG";
const LINK: &str = "rm -f CONFIG\nln -s \"$PROMPTS/agents.toml\" CONFIG";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redraft_toml_the_agent_creates_is_removed() {
    configuration_is_put_back("creates", "redraft.toml", false, &[], WRITE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redraft_toml_the_agent_creates_is_removed_with_protect_globs_too() {
    configuration_is_put_back("creates_with_globs", "redraft.toml", false, &["--protect", "tests/**"], WRITE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_redraft_toml_changed_by_the_agent_is_put_back() {
    configuration_is_put_back("changes", "redraft.toml", true, &[], WRITE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_redraft_toml_replaced_by_a_symlink_is_put_back() {
    configuration_is_put_back("links", "redraft.toml", true, &[], LINK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_file_named_by_config_is_put_back() {
    configuration_is_put_back("named", "conf/strict.toml", true, &["--config", "conf/strict.toml"], WRITE).await;
}

/// The tests' `HOME` is the working directory, so the XDG file is in it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xdg_config_file_in_the_working_directory_is_protected_even_when_absent() {
    configuration_is_put_back("xdg", ".config/redraft/redraft.toml", false, &[], WRITE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redraft_toml_the_verifier_leaves_is_removed_but_not_blamed() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("verifier_leaves", dir.path(), Repo::Plain).unwrap();
    let agent = cheat_then_fix(prompts.path(), "echo 'echo $(( $1 + $2 ))' > calc.sh");
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "echo 'x = 1' > redraft.toml; ./tests/check.sh", "--task", "t", "--", "sh", &agent],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 1 iteration(s)"), "{}", out.stderr);
    assert!(!dir.path().join("redraft.toml").exists(), "put back as the loop found it");
    assert!(out.stderr.contains("`redraft.toml`"), "what the verifier left is named: {}", out.stderr);
    assert_eq!(listing(dir.path()).iter().filter(|n| n.ends_with(".toml")).count(), 0);
}

/// The user's `redraft.toml` is a link to a configuration shared from outside the working
/// directory: the link itself is protected (the agent could put a file of its own in its place,
/// and the next loop would read that), and the shared file is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redraft_toml_that_is_a_link_to_a_shared_file_is_put_back_as_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    protected_project("shared_link", dir.path(), Repo::Plain).unwrap();
    let target = write(shared.path(), "redraft.toml", USERS);
    std::os::unix::fs::symlink(&target, dir.path().join("redraft.toml")).unwrap();
    write(prompts.path(), "agents.toml", AGENTS);
    let agent = cheat_then_fix(prompts.path(), "rm redraft.toml\ncp \"$PROMPTS/agents.toml\" redraft.toml");
    let out =
        output(until(dir.path(), prompts.path(), &["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent]))
            .await;
    assert_eq!(std::fs::read_link(dir.path().join("redraft.toml")).unwrap(), target, "the link is back");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), USERS, "the shared file is untouched");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{first}");
    assert!(first.contains("`redraft.toml` is redraft's configuration"), "{first}");
    let prompt = std::fs::read_to_string(prompts.path().join("stdin-1.txt")).unwrap();
    assert!(prompt.contains("`redraft.toml`"), "the agent is told: {prompt}");
}
