use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt as _;

use super::*;
use crate::until::root::Root;

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn paths(found: &[Finding]) -> Vec<&str> {
    found.iter().map(|f| f.path.as_str()).collect()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| shown(Path::new(&e.unwrap().file_name()))).collect();
    names.sort();
    names
}

/// One agent turn: `turn` changes the directory, then the turn ends.
fn turn(p: &Protected, turn: impl FnOnce()) -> Vec<Finding> {
    p.begin_turn().unwrap();
    turn();
    p.end_turn().unwrap()
}

fn capture(dir: &Path, globs: &[String]) -> Result<Protected> {
    Protected::capture(Arc::new(Root::pin(dir)?), globs, &[])
}

#[test]
fn restores_changed_and_deleted_files_and_removes_added_ones() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/a.sh"), "original a").unwrap();
    fs::write(dir.path().join("tests/b.sh"), "original b").unwrap();
    fs::set_permissions(dir.path().join("tests/b.sh"), fs::Permissions::from_mode(0o750)).unwrap();
    fs::write(dir.path().join("src.txt"), "code").unwrap();
    let p = capture(dir.path(), &["tests/*.sh".to_owned()]).unwrap();
    assert_eq!(p.paths(), ["tests/a.sh", "tests/b.sh"]);
    assert!(turn(&p, || {}).is_empty());

    let issues = turn(&p, || {
        fs::write(dir.path().join("tests/a.sh"), "exit 0").unwrap();
        fs::remove_file(dir.path().join("tests/b.sh")).unwrap();
        fs::write(dir.path().join("tests/c.sh"), "new").unwrap();
        fs::write(dir.path().join("tests/notes.txt"), "not matched").unwrap();
        fs::write(dir.path().join("src.txt"), "changed code").unwrap();
    });
    assert_eq!(paths(&issues), ["tests/a.sh", "tests/b.sh", "tests/c.sh"]);
    let issue = issues[0].issue();
    assert_eq!(issue.code, PROTECTED_FILE_MODIFIED);
    assert!(issue.message.ends_with("Change the code under test, not the tests or the verifier."), "{issue:?}");
    assert!(issues[0].text.contains("was changed; it has been put back"), "{}", issues[0].text);
    assert!(issues[1].text.contains("was deleted; it has been put back"), "{}", issues[1].text);
    assert!(issues[2].text.contains("was added; it has been removed"), "{}", issues[2].text);
    assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original a");
    assert_eq!(fs::read_to_string(dir.path().join("tests/b.sh")).unwrap(), "original b");
    assert_eq!(mode(&dir.path().join("tests/b.sh")), 0o750);
    assert!(!dir.path().join("tests/c.sh").exists());
    assert_eq!(fs::read_to_string(dir.path().join("tests/notes.txt")).unwrap(), "not matched");
    assert_eq!(fs::read_to_string(dir.path().join("src.txt")).unwrap(), "changed code");
    assert!(turn(&p, || {}).is_empty(), "everything is back");
}

#[test]
fn globs_that_match_nothing_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.sh"), "a").unwrap();
    fs::create_dir_all(dir.path().join("spec")).unwrap();
    let p = capture(dir.path(), &["a.sh".to_owned(), "tests/**".to_owned(), "spec".to_owned()]).unwrap();
    assert_eq!(p.unmatched(), ["tests/**", "spec"]);
}

#[test]
fn a_symlink_is_replaced_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/a.sh"), "original").unwrap();
    fs::write(outside.path().join("a.sh"), "outside").unwrap();
    let p = capture(dir.path(), &["tests/*.sh".to_owned()]).unwrap();

    // The file itself becomes a link to a file outside.
    let issues = turn(&p, || {
        fs::remove_file(dir.path().join("tests/a.sh")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("a.sh"), dir.path().join("tests/a.sh")).unwrap();
    });
    assert_eq!(paths(&issues), ["tests/a.sh"]);
    assert!(issues[0].text.contains("replaced by a symlink"), "{}", issues[0].text);
    assert!(fs::symlink_metadata(dir.path().join("tests/a.sh")).unwrap().is_file());
    assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original");
    assert_eq!(fs::read_to_string(outside.path().join("a.sh")).unwrap(), "outside");

    // The directory becomes a link to a directory outside, with a file the glob matches.
    let issues = turn(&p, || {
        fs::remove_dir_all(dir.path().join("tests")).unwrap();
        fs::write(outside.path().join("b.sh"), "outside b").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("tests")).unwrap();
    });
    assert_eq!(paths(&issues), ["tests/a.sh"]);
    assert!(issues[0].text.contains("its directory `tests` was replaced by a symlink"), "{}", issues[0].text);
    assert!(fs::symlink_metadata(dir.path().join("tests")).unwrap().is_dir());
    assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original");
    assert_eq!(fs::read_to_string(outside.path().join("a.sh")).unwrap(), "outside");
    assert_eq!(fs::read_to_string(outside.path().join("b.sh")).unwrap(), "outside b");

    // An added link under a protected directory is removed, not what it points to.
    let issues = turn(&p, || {
        std::os::unix::fs::symlink(outside.path().join("b.sh"), dir.path().join("tests/b.sh")).unwrap();
    });
    assert_eq!(paths(&issues), ["tests/b.sh"]);
    assert!(issues[0].text.contains("was added (a symlink); it has been removed"), "{}", issues[0].text);
    assert!(fs::symlink_metadata(dir.path().join("tests/b.sh")).is_err());
    assert_eq!(fs::read_to_string(outside.path().join("b.sh")).unwrap(), "outside b");
}

#[test]
fn protected_symlinks_and_modes_come_back() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/run.sh"), "run").unwrap();
    fs::set_permissions(dir.path().join("tests/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("run.sh", dir.path().join("tests/alias.sh")).unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    assert_eq!(p.paths(), ["tests/alias.sh", "tests/run.sh"]);

    let issues = turn(&p, || {
        fs::set_permissions(dir.path().join("tests/run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::remove_file(dir.path().join("tests/alias.sh")).unwrap();
        fs::write(dir.path().join("tests/alias.sh"), "run").unwrap();
        fs::set_permissions(dir.path().join("tests"), fs::Permissions::from_mode(0o500)).unwrap();
    });
    assert_eq!(paths(&issues), ["tests", "tests/alias.sh", "tests/run.sh"]);
    assert!(
        issues[0].text.contains("`tests` is protected and was given mode `500` instead of `755`"),
        "{}",
        issues[0].text
    );
    assert!(issues[1].text.contains("`tests/alias.sh` is protected and was replaced by a file"), "{}", issues[1].text);
    assert!(issues[2].text.contains("given mode `644` instead of `755`"), "{}", issues[2].text);
    assert_eq!(fs::read_link(dir.path().join("tests/alias.sh")).unwrap(), Path::new("run.sh"));
    assert_eq!(mode(&dir.path().join("tests/run.sh")), 0o755);
    assert_eq!(mode(&dir.path().join("tests")), 0o755);
}

#[test]
fn everything_added_is_removed_whatever_its_name_or_kind() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    let issues = turn(&p, || {
        let tests = dir.path().join("tests");
        fs::write(tests.join(OsStr::from_bytes(b"x\xff.sh")), "not UTF-8").unwrap();
        fs::write(tests.join(".hidden"), "dotfile").unwrap();
        fs::create_dir_all(tests.join("more/deeper")).unwrap();
        fs::write(tests.join("more/deeper/a.sh"), "deep").unwrap();
        fs::set_permissions(tests.join("more/deeper"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::create_dir_all(tests.join("empty")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tests.join("linked")).unwrap();
        std::process::Command::new("mkfifo").arg(tests.join("pipe")).status().unwrap();
    });
    assert_eq!(
        paths(&issues),
        ["tests/.hidden", "tests/empty", "tests/linked", "tests/more", "tests/pipe", "\"tests/x\\xff.sh\""]
    );
    assert!(issues[1].text.contains("was added (a directory); it has been removed"), "{}", issues[1].text);
    assert!(issues[4].text.contains("was added (a special file); it has been removed"), "{}", issues[4].text);
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    assert!(outside.path().is_dir(), "the link was removed, not what it points to");
}

#[test]
fn what_the_verifier_wrote_is_not_blamed_on_the_agent_but_is_put_back_before_the_verifier() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    // The verifier leaves a report and a cache.
    fs::write(dir.path().join("tests/report.xml"), "<report/>").unwrap();
    fs::create_dir_all(dir.path().join("tests/__pycache__")).unwrap();
    fs::write(dir.path().join("tests/__pycache__/check.pyc"), "compiled").unwrap();
    // The agent's turn changes nothing: nothing is blamed, and the paths are as before the loop.
    assert!(turn(&p, || {}).is_empty());
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    // The agent's turn writes a cache (running the tests): put back, not blamed.
    let issues = turn(&p, || {
        fs::create_dir_all(dir.path().join("tests/.pytest_cache/v")).unwrap();
        fs::write(dir.path().join("tests/.pytest_cache/v/lastfailed"), "{}").unwrap();
    });
    assert!(issues.is_empty(), "{issues:?}");
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    // What the verifier leaves is named when the loop is settled.
    fs::write(dir.path().join("tests/report.xml"), "<report/>").unwrap();
    let settled = p.restore_all().unwrap();
    assert_eq!(paths(&settled), ["tests/report.xml"]);
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
}

#[test]
fn right_before_the_verifier_everything_is_as_it_was_before_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let was = fs::symlink_metadata(dir.path().join("tests/check.sh")).unwrap().modified().unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    assert_eq!(p.before_verifier(), Ok(Vec::new()));
    // A process that outlived its command rewrote the test, keeping its time.
    fs::write(dir.path().join("tests/check.sh"), "exit 0").unwrap();
    fs::File::open(dir.path().join("tests/check.sh")).unwrap().set_modified(was).unwrap();
    let fixed = p.before_verifier().unwrap();
    assert_eq!(paths(&fixed), ["tests/check.sh"]);
    assert_eq!(fs::read_to_string(dir.path().join("tests/check.sh")).unwrap(), "check");
    // Only the time: put back too, without a finding.
    fs::File::open(dir.path().join("tests/check.sh")).unwrap().set_modified(SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!(p.before_verifier(), Ok(Vec::new()));
    assert_eq!(fs::symlink_metadata(dir.path().join("tests/check.sh")).unwrap().modified().unwrap(), was);
}

#[test]
fn a_directory_replaced_by_a_file_and_a_file_by_a_directory_come_back() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests/unit")).unwrap();
    fs::write(dir.path().join("tests/unit/a.sh"), "a").unwrap();
    fs::write(dir.path().join("tests/b.sh"), "b").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    let issues = turn(&p, || {
        fs::remove_dir_all(dir.path().join("tests/unit")).unwrap();
        fs::write(dir.path().join("tests/unit"), "a file").unwrap();
        fs::remove_file(dir.path().join("tests/b.sh")).unwrap();
        fs::create_dir_all(dir.path().join("tests/b.sh/inside")).unwrap();
    });
    assert_eq!(paths(&issues), ["tests/b.sh", "tests/unit"]);
    assert!(issues[0].text.contains("was replaced by a directory"), "{}", issues[0].text);
    assert!(issues[1].text.contains("was replaced by a file"), "{}", issues[1].text);
    assert_eq!(fs::read_to_string(dir.path().join("tests/unit/a.sh")).unwrap(), "a");
    assert_eq!(fs::read_to_string(dir.path().join("tests/b.sh")).unwrap(), "b");
}

#[test]
fn a_protected_file_hard_linked_outside_is_replaced_never_touched_through_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    // The same bytes, but the inode of a file outside, whose time says otherwise.
    fs::write(outside.path().join("copy"), "check").unwrap();
    fs::File::open(outside.path().join("copy")).unwrap().set_modified(SystemTime::UNIX_EPOCH).unwrap();
    fs::remove_file(dir.path().join("tests/check.sh")).unwrap();
    fs::hard_link(outside.path().join("copy"), dir.path().join("tests/check.sh")).unwrap();
    assert_eq!(p.before_verifier(), Ok(Vec::new()), "the same bytes: nothing to blame");
    let meta = fs::symlink_metadata(dir.path().join("tests/check.sh")).unwrap();
    assert_eq!(meta.nlink(), 1, "a file of its own again");
    let outside_time = fs::metadata(outside.path().join("copy")).unwrap().modified().unwrap();
    assert_eq!(outside_time, SystemTime::UNIX_EPOCH, "the file outside was not touched");
}

#[test]
fn configuration_files_are_protected_there_or_not() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("redraft.toml"), "[policy]\n").unwrap();
    let config = [PathBuf::from("redraft.toml"), PathBuf::from(".config/redraft/redraft.toml")];
    let p = Protected::capture(Arc::new(Root::pin(dir.path()).unwrap()), &[], &config).unwrap();
    assert!(!p.has_globs());
    assert!(p.unmatched().is_empty(), "a configuration file that is not there is no unmatched glob");
    let issues = turn(&p, || {
        fs::write(dir.path().join("redraft.toml"), "[sandboxes.strict]\n").unwrap();
        fs::create_dir_all(dir.path().join(".config/redraft")).unwrap();
        fs::write(dir.path().join(".config/redraft/redraft.toml"), "[sandboxes.strict]\n").unwrap();
    });
    assert_eq!(paths(&issues), [".config/redraft/redraft.toml", "redraft.toml"]);
    assert!(
        issues[0].text.contains(
            "would be redraft's configuration (the next loop would read it) and was added; it has been removed"
        ),
        "{}",
        issues[0].text
    );
    assert!(
        issues[1].text.contains("is redraft's configuration (the next loop reads it) and was changed"),
        "{}",
        issues[1].text
    );
    assert_eq!(fs::read_to_string(dir.path().join("redraft.toml")).unwrap(), "[policy]\n");
    assert!(!dir.path().join(".config/redraft/redraft.toml").exists());
}

#[test]
fn what_the_agent_only_put_back_is_not_blamed() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    // The verifier leaves a report; the agent deletes it: the paths are as before the loop.
    fs::write(dir.path().join("tests/report.xml"), "<report/>").unwrap();
    p.begin_turn().unwrap();
    fs::remove_file(dir.path().join("tests/report.xml")).unwrap();
    assert_eq!(p.end_turn().unwrap(), Vec::new());
}

#[test]
fn huge_files_are_never_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let p = capture(dir.path(), &["tests/**".to_owned()]).unwrap();
    let issues = turn(&p, || {
        // A terabyte: reading it would take hours; sparse, it takes no room.
        let big = fs::File::create(dir.path().join("tests/big.bin")).unwrap();
        big.set_len(1 << 40).unwrap();
        let swapped = fs::File::create(dir.path().join("tests/check.sh")).unwrap();
        swapped.set_len(1 << 40).unwrap();
    });
    assert_eq!(paths(&issues), ["tests/big.bin", "tests/check.sh"]);
    assert!(issues[1].text.contains("was changed; it has been put back"), "{}", issues[1].text);
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    assert_eq!(fs::read_to_string(dir.path().join("tests/check.sh")).unwrap(), "check");
}

#[test]
fn a_tree_of_any_depth_is_walked_on_a_small_stack() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("tests/check.sh"), "check").unwrap();
    let deep: PathBuf = std::iter::repeat_n("d", 600).collect();
    let path = dir.path().to_owned();
    let found = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let p = capture(&path, &["tests/**".to_owned()]).unwrap();
            turn(&p, || {
                fs::create_dir_all(path.join("tests").join(&deep)).unwrap();
            })
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(paths(&found), ["tests/d"]);
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
}
