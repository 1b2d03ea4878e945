//! Hostile requests: `exec:` commands that try to run something beyond what an allow-list
//! entry admits. Each payload, were it run by `sh -c`, would leave a marker file behind
//! (`touch MARK`, a redirection, a tool writing its output, a fake program first on a path), so
//! a test asserts both that every one was refused and that no marker exists.

/// The allow-list the payloads are aimed at: a compiler check with one argument, a test runner
/// with any plain arguments, a command with no argument, a check of the artifact.
pub const EXEC_ALLOW: [&str; 5] =
    ["python3 -m py_compile *", "python3 -m py_compile {artifact}", "pytest -q **", "true", "test -s {artifact}"];

/// Commands that `EXEC_ALLOW` must admit (they run and create nothing).
pub const EXEC_ALLOWED: [&str; 4] =
    ["python3 -m py_compile {artifact}", "true", "test -s {artifact}", "python3  -m 'py_compile' {artifact}"];

/// The hostile commands, `(what it tries, command)`. `mark(i)` is the marker path of payload
/// `i` (each its own, so a failure names the payload); `fake_bin` is a directory holding an
/// executable `python3` ([`FAKE_PYTHON`]) that leaves a file `ran` beside itself when run.
pub fn exec_payloads(mark: impl Fn(usize) -> String, fake_bin: &str) -> Vec<(&'static str, String)> {
    let raw: Vec<(&'static str, String)> = vec![
        // Separators.
        ("semicolon", "python3 -m py_compile x; touch MARK".into()),
        ("semicolon, no space", "true;touch MARK".into()),
        ("and-list", "python3 -m py_compile x && touch MARK".into()),
        ("or-list", "python3 -m py_compile x || touch MARK".into()),
        ("pipe", "python3 -m py_compile x | touch MARK".into()),
        ("background", "true & touch MARK".into()),
        ("pipe to stderr", "true |& touch MARK".into()),
        ("negation then separator", "! true; touch MARK".into()),
        ("subshell", "(touch MARK)".into()),
        ("separator after the artifact", "test -s {artifact} ; touch MARK".into()),
        // Newlines and control characters.
        ("newline", "true\ntouch MARK".into()),
        ("carriage return and newline", "true\r\ntouch MARK".into()),
        ("line continuation", "true \\\n; touch MARK".into()),
        ("newline inside quotes", "python3 -m py_compile 'x\n'; touch MARK".into()),
        ("NUL byte", "true\u{0}; touch MARK".into()),
        // Substitutions and expansions.
        ("command substitution", "python3 -m py_compile $(touch MARK)".into()),
        ("command substitution in double quotes", "python3 -m py_compile \"$(touch MARK)\"".into()),
        ("backticks", "python3 -m py_compile `touch MARK`".into()),
        ("backticks in double quotes", "python3 -m py_compile \"`touch MARK`\"".into()),
        ("substitution with IFS", "python3 -m py_compile $(touch${IFS}MARK)".into()),
        ("arithmetic then substitution", "pytest -q $((1))$(touch MARK)".into()),
        ("substitution glued to the artifact", "test -s {artifact}$(touch MARK)".into()),
        ("process substitution", "test -s <(touch MARK)".into()),
        ("quoted then substituted", "python3 -m py_compile 'x'\"$(touch MARK)\"".into()),
        // Redirections.
        ("redirect stdout", "python3 -m py_compile x > MARK".into()),
        ("append", "python3 -m py_compile x >> MARK".into()),
        ("redirect, no space", "true >MARK".into()),
        ("redirect stderr", "pytest -q 2>MARK".into()),
        ("clobber", "pytest -q x >|MARK".into()),
        // Quoting tricks.
        ("escaped semicolon", "python3 -m py_compile x\\;touch MARK".into()),
        ("quote closed early", "python3 -m py_compile \"x\"';'touch MARK".into()),
        ("unterminated quote", "true 'x; touch MARK".into()),
        // Variable and assignment tricks.
        ("assignment before the program", "BASH_ENV=MARK python3 -m py_compile x".into()),
        ("PATH assignment", "PATH=/tmp:$PATH python3 -m py_compile x".into()),
        ("IFS assignment", "IFS=x python3 -m py_compile x".into()),
        ("IFS expansion", "python3 -m py_compile ${IFS}touch${IFS}MARK".into()),
        ("parameter expansion", "python3 -m py_compile $HOME; touch MARK".into()),
        ("env as the program", "env touch MARK".into()),
        ("exec as the program", "exec touch MARK".into()),
        // Argument injection through a wildcard.
        ("option through **", "pytest -q --junitxml=MARK".into()),
        ("option with a separate value", "pytest -q --basetemp MARK".into()),
        ("short option through **", "pytest -q -o cache_dir=MARK".into()),
        ("option through *", "python3 -m py_compile --help".into()),
        ("other module", "python3 -m zipfile -c MARK x".into()),
        ("inline code", "python3 -c open('MARK','w')".into()),
        ("the model's artifact through **", "pytest -q {artifact}".into()),
        ("the model's artifact as a module", "python3 -m {artifact} MARK".into()),
        // Globs, braces, tildes, comments.
        ("glob", "python3 -m py_compile *".into()),
        ("brace expansion", "python3 -m py_compile {x,y}; touch MARK".into()),
        ("tilde", "python3 -m py_compile ~/x".into()),
        ("comment hiding the rest", "python3 -m py_compile x #; touch MARK".into()),
        // Path tricks: a program of the same name elsewhere.
        ("absolute path to another python3", format!("{fake_bin}/python3 -m py_compile x")),
        ("relative path to another python3", "./python3 -m py_compile x".into()),
        ("absolute path argument", "python3 -m py_compile /etc/passwd".into()),
        ("parent directory argument", "python3 -m py_compile ../../x".into()),
        // Look-alike characters.
        ("fullwidth semicolon", "python3 -m py_compile x\u{ff1b}touch MARK".into()),
        ("Greek omicron in the program", "pyth\u{3bf}n3 -m py_compile x".into()),
        ("no-break space", "python3\u{a0}-m py_compile x; touch MARK".into()),
        ("line separator", "true\u{2028}touch MARK".into()),
        ("zero-width space", "tr\u{200b}ue; touch MARK".into()),
    ];
    raw.into_iter().enumerate().map(|(i, (what, cmd))| (what, cmd.replace("MARK", &mark(i)))).collect()
}

/// The `python3` placed in `fake_bin` (and in the working directory) for the path tricks: it
/// leaves a file `ran` in its own directory when run.
pub const FAKE_PYTHON: &str = "#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\n";
