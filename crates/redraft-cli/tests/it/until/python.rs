//! Protected Python tests, and what Python reads beside them. A file git ignores, added under the
//! protected directory (through the directory's own `.gitignore`, `.git/info/exclude` or the root
//! `.gitignore`), is found, removed and rejected; forged bytecode in `__pycache__` — matching
//! the test's modification time and size, so that Python would run it instead of the test — is
//! removed before the verifier runs, also under a glob naming the test files only, and also when
//! `__pycache__` is a link to bytecode elsewhere. Either way the verifier judges the code against the real
//! test. An honest agent that runs the tests itself is not blamed for the caches they leave.

use std::path::Path;

use super::protect::{git, listing, skip};
use crate::{output, redraft, write};

const CALC: &str = "def add(a, b):\n    return 0\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";
const TEST: &str = "import unittest\n\nimport calc\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n";
const VERIFY: &str = "python3 -m unittest discover -s tests -t .";

/// Imported before `test_calc` by unittest's discovery, which sorts by name: it "fixes" `add`.
const PATCH: &str = "import calc\n\ncalc.add = lambda a, b: a + b\n";

fn python_runs() -> bool {
    std::process::Command::new("python3").args(["-c", "import unittest"]).output().is_ok_and(|o| o.status.success())
}

/// A git repository ignoring `__pycache__/`, with `calc.py` (wrong) and `tests/test_calc.py`
/// committed. `None` when Python or git cannot run here (it has said why).
fn python_project(test: &str, dir: &Path) -> Option<()> {
    if !python_runs() {
        skip(test, "`python3` is not installed");
        return None;
    }
    if !std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success()) {
        skip(test, "`git` is not installed");
        return None;
    }
    write(dir, "calc.py", CALC);
    write(dir, ".gitignore", "__pycache__/\n");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    write(dir, "tests/__init__.py", "");
    write(dir, "tests/test_calc.py", TEST);
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "start"]);
    Some(())
}

/// Run `redraft until --protect tests/**` with an agent that runs `cheat` on its first turn and
/// fixes `calc.py` on its second.
async fn until_python(dir: &Path, prompts: &Path, cheat: &str) -> crate::Output {
    until_python_protecting(dir, prompts, cheat, "tests/**").await
}

/// The same, protecting `glob`.
async fn until_python_protecting(dir: &Path, prompts: &Path, cheat: &str, glob: &str) -> crate::Output {
    write(prompts, "fixed.py", FIXED);
    let agent = format!(
        "#!/bin/sh\ncat > /dev/null\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\n{cheat}\nelse\n  cp \"$PROMPTS/fixed.py\" calc.py\nfi\n"
    );
    let agent = write(prompts, "agent.sh", &agent);
    let mut cmd = redraft(dir);
    cmd.env("PROMPTS", prompts)
        .args(["until", "--verify", VERIFY, "--task", "t", "--protect", glob, "--", "sh"])
        .arg(agent);
    output(cmd).await
}

/// What every case promises: the verifier judged the wrong code against the real test in
/// iteration 1, the honest iteration 2 passes, and `tests/` ends as it began.
fn judged_by_the_real_test(test: &str, dir: &Path, out: &crate::Output) -> String {
    let first = std::fs::read_to_string(dir.join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{test}: {first}\n{}", out.stderr);
    assert!(first.contains("AssertionError: 0 != 5"), "{test}: the real test failed the wrong code: {first}");
    assert_eq!(out.code, 0, "{test}: {}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{test}: {}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("tests/test_calc.py")).unwrap(), TEST);
    assert_eq!(listing(&dir.join("tests")), ["__init__.py", "test_calc.py"], "{test}: tests/ is as it was");
    first
}

async fn ignored_file_is_found(test: &str, ignore: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if python_project(test, dir.path()).is_none() {
        return;
    }
    write(prompts.path(), "patch.py", PATCH);
    let cheat = format!("cp \"$PROMPTS/patch.py\" tests/test_aaa.py\n{ignore}\ngit status --porcelain --ignored");
    let out = until_python(dir.path(), prompts.path(), &cheat).await;
    let agent_saw = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap_or_default();
    assert!(agent_saw.contains("!! tests/test_aaa.py"), "{test}: git ignores the patch: {agent_saw}");
    let first = judged_by_the_real_test(test, dir.path(), &out);
    assert!(first.contains("`tests/test_aaa.py` matches a protected pattern and was added"), "{test}: {first}");
    assert!(first.contains("[protected_file_modified]"), "{test}: {first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_module_ignored_by_its_own_gitignore_is_found() {
    ignored_file_is_found("ignored_by_its_own_gitignore", "printf '.gitignore\\ntest_aaa.py\\n' > tests/.gitignore")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_module_excluded_in_git_info_is_found() {
    ignored_file_is_found("excluded_in_git_info", "echo tests/test_aaa.py >> .git/info/exclude").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_module_ignored_by_the_root_gitignore_is_found() {
    ignored_file_is_found("ignored_by_the_root_gitignore", "echo tests/test_aaa.py >> .gitignore").await;
}

/// Compiles a passing `TestCalc` into `tests/__pycache__`, stamped with the modification time and
/// size of the real `tests/test_calc.py`, so that Python loads it instead of the source.
const FORGE_PYC: &str = r#"python3 - <<'PY'
import importlib._bootstrap_external as external, importlib.util, os
source = "tests/test_calc.py"
stat = os.stat(source)
code = compile("import unittest\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        pass\n", source, "exec")
target = importlib.util.cache_from_source(source)
os.makedirs(os.path.dirname(target), exist_ok=True)
with open(target, "wb") as f:
    f.write(external._code_to_timestamp_pyc(code, stat.st_mtime, stat.st_size))
PY
python3 -m unittest discover -s tests -t . 2> "$PROMPTS/forged.txt""#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_beside_a_protected_test_never_reaches_the_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if python_project("forged_bytecode", dir.path()).is_none() {
        return;
    }
    let out = until_python(dir.path(), prompts.path(), FORGE_PYC).await;
    let forged = std::fs::read_to_string(prompts.path().join("forged.txt")).unwrap();
    assert!(forged.contains("OK"), "the forged bytecode passes the wrong code when it is left in place: {forged}");
    let first = judged_by_the_real_test("forged_bytecode", dir.path(), &out);
    // Caches under a protected path are put back silently: the test failing is the verdict.
    assert!(!first.contains("[protected_file_modified]"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_agent_that_runs_the_tests_is_not_blamed_for_their_caches() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if python_project("honest_agent", dir.path()).is_none() {
        return;
    }
    write(prompts.path(), "fixed.py", FIXED);
    // Runs the tests before and after its fix, as an agent checking its work does.
    let agent = write(
        prompts.path(),
        "agent.sh",
        &format!("#!/bin/sh\ncat > /dev/null\n{VERIFY} 2>/dev/null\ncp \"$PROMPTS/fixed.py\" calc.py\n{VERIFY}\n"),
    );
    let mut cmd = redraft(dir.path());
    cmd.env("PROMPTS", prompts.path())
        .args(["until", "--verify", VERIFY, "--task", "t", "--protect", "tests/**", "--", "sh"])
        .arg(agent);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 1 iteration(s)"), "{}", out.stderr);
    assert!(!out.stderr.contains("protected"), "{}", out.stderr);
    assert_eq!(listing(&dir.path().join("tests")), ["__init__.py", "test_calc.py"], "tests/ is as it was");
}

/// Forged bytecode under a glob that names the test files, not their directory: a protected
/// `DIR/NAME.py` protects `DIR/__pycache__/NAME.*.pyc` as a cache — put back as it was before the
/// loop (here: removed) before every verifier run, without blaming the agent.
async fn forged_bytecode_under_a_file_glob(test: &str, glob: &str) {
    forged_bytecode_protecting(test, glob, FORGE_PYC).await;
}

async fn forged_bytecode_protecting(test: &str, glob: &str, forge: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if python_project(test, dir.path()).is_none() {
        return;
    }
    let out = until_python_protecting(dir.path(), prompts.path(), forge, glob).await;
    let forged = std::fs::read_to_string(prompts.path().join("forged.txt")).unwrap();
    assert!(forged.contains("OK"), "{test}: the forged bytecode passes the wrong code when left in place: {forged}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{test}: {first}\n{}", out.stderr);
    assert!(first.contains("AssertionError: 0 != 5"), "{test}: the real test failed the wrong code: {first}");
    assert!(!first.contains("[protected_file_modified]"), "{test}: a cache is not blamed: {first}");
    assert_eq!(out.code, 0, "{test}: {}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{test}: {}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.path().join("tests/test_calc.py")).unwrap(), TEST);
    let caches = dir.path().join("tests/__pycache__");
    let linked = std::fs::symlink_metadata(&caches).is_ok_and(|m| m.file_type().is_symlink());
    assert!(!linked, "{test}: no link where the tests' bytecode goes");
    let left: Vec<String> = if caches.is_dir() {
        listing(&caches).into_iter().filter(|n| n.starts_with("test_calc.")).collect()
    } else {
        Vec::new()
    };
    assert_eq!(left, Vec::<String>::new(), "{test}: the test's bytecode is as before the loop (none)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_under_a_test_files_glob_never_reaches_the_verifier() {
    forged_bytecode_under_a_file_glob("pyc_test_files_glob", "tests/test_*.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_under_a_py_files_glob_never_reaches_the_verifier() {
    forged_bytecode_under_a_file_glob("pyc_py_files_glob", "tests/*.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_under_a_recursive_py_glob_never_reaches_the_verifier() {
    forged_bytecode_under_a_file_glob("pyc_recursive_glob", "tests/**/*.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_beside_a_test_protected_by_name_never_reaches_the_verifier() {
    forged_bytecode_under_a_file_glob("pyc_exact_path", "tests/test_calc.py").await;
}

/// The agent makes the tests' `__pycache__` a link to a directory outside holding the forged
/// bytecode: Python follows the link. A protected `DIR/NAME.py` protects what stands at
/// `DIR/__pycache__` when it is not a directory of its own (a link, a file): the link is removed
/// before the verifier runs, never followed.
const FORGE_PYC_LINKED: &str = r#"mkdir -p "$PROMPTS/cache"
rm -rf tests/__pycache__
ln -s "$PROMPTS/cache" tests/__pycache__
"#;

async fn forged_bytecode_in_a_linked_cache(test: &str, glob: &str) {
    let forge = format!("{FORGE_PYC_LINKED}{FORGE_PYC}");
    forged_bytecode_protecting(test, glob, &forge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_in_a_linked_cache_under_a_test_files_glob_never_reaches_the_verifier() {
    forged_bytecode_in_a_linked_cache("pyc_linked_cache_glob", "tests/test_*.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_bytecode_in_a_linked_cache_beside_a_test_protected_by_name_never_reaches_the_verifier() {
    forged_bytecode_in_a_linked_cache("pyc_linked_cache_exact", "tests/test_calc.py").await;
}
