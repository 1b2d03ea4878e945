//! `redraft until` with fake agents (shell scripts) and real verifiers: the iterations, their
//! reports and decisions ([`iterations`]), how a loop stops ([`stopping`]), protected files
//! ([`protect`], the cheats they undo in [`cheats`], Python's tests and caches in [`python`]),
//! the agent's git configuration, which never runs ([`hostile`]), and the agent's background
//! processes, dead before the workspace is read and before the verifier starts ([`background`]);
//! redraft's configuration, protected in every loop ([`config`]); a working directory swapped for
//! another ([`moved`]); changes hidden from the reports ([`reports`]); and files that would block
//! redraft or make it crawl ([`files`]).

mod background;
mod cheats;
mod config;
mod files;
mod hopper;
mod hostile;
mod iterations;
mod moved;
mod protect;
mod python;
mod reports;
mod stopping;

use std::path::Path;

use crate::{redraft, write};

const CALC_TEST: &str = r#"out=$(sh calc.sh 2 3)
if [ "$out" != "5" ]; then
  echo "test.sh:2: expected 5, got $out"
  exit 1
fi
echo "all tests pass"
"#;

/// An agent that needs three iterations to fix `calc.sh`, saving each prompt it was given.
const FIXING_AGENT: &str = r#"#!/bin/sh
cat > "$PROMPTS/stdin-$REDRAFT_ITERATION.txt"
cp "$REDRAFT_PROMPT_FILE" "$PROMPTS/file-$REDRAFT_ITERATION.txt"
case "$REDRAFT_ITERATION" in
  1) echo 'echo $(( $1 - $2 ))' > calc.sh ;;
  2) echo 'echo $(( $1 + $2 + 1 ))' > calc.sh ;;
  *) echo 'echo $(( $1 + $2 ))' > calc.sh ;;
esac
echo "edited calc.sh (iteration $REDRAFT_ITERATION of $REDRAFT_MAX_ITERATIONS)"
"#;

fn project(dir: &Path) {
    write(dir, "calc.sh", "echo 0\n");
    write(dir, "test.sh", CALC_TEST);
}

fn until(dir: &Path, prompts: &Path, args: &[&str]) -> assert_cmd::Command {
    let mut c = redraft(dir);
    c.env("PROMPTS", prompts).arg("until").args(args);
    c
}
