//! The command lines a document shows, so a test can hand each to the
//! program's own argument parser and the documentation stays true.

/// Every command line of `program` in `doc`'s fenced code blocks, as
/// arguments after the program's name: shell lines that run it
/// (`sudo -u USER`, `NAME=value` assignments and a directory before its
/// name are allowed; `\` continuations are
/// joined; a `# comment`, a `> file` redirection and what follows are
/// dropped) and systemd `ExecStart=` lines.
pub fn command_lines(doc: &str, program: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            pending.clear();
            continue;
        }
        if !in_block {
            continue;
        }
        let line = line.strip_prefix("ExecStart=").unwrap_or(line);
        pending.push_str(line.trim());
        if let Some(cut) = pending.strip_suffix('\\') {
            pending = format!("{} ", cut.trim_end());
            continue;
        }
        let whole = std::mem::take(&mut pending);
        let whole = whole.split(" #").next().unwrap_or_default();
        let whole = whole.split(" > ").next().unwrap_or_default();
        let mut words = whole.split_whitespace().peekable();
        // `sudo -u USER` and `NAME=value` assignments may come first.
        if words.peek() == Some(&"sudo") {
            words.next();
            if words.peek() == Some(&"-u") {
                words.nth(1);
            }
        }
        while words
            .peek()
            .is_some_and(|w| w.contains('=') && !w.starts_with('-'))
        {
            words.next();
        }
        if words.next().and_then(|w| w.rsplit('/').next()) == Some(program) {
            out.push(words.map(str::to_string).collect());
        }
    }
    out
}

/// The documents whose command lines the programs' tests parse.
pub const COMMAND_DOCS: [&str; 2] = ["README.md", "docs/deploy.md"];

/// Hand every `program` command line of [`COMMAND_DOCS`] (as the full
/// argv, the program's name first) to `parse`; panics naming the document
/// and the line a parse refuses. Returns how many lines were parsed.
pub fn parse_documented_commands<E: std::fmt::Display>(
    program: &str,
    parse: impl Fn(Vec<String>) -> Result<(), E>,
) -> usize {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut seen = 0;
    for doc in COMMAND_DOCS {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).expect(doc);
        for args in command_lines(&text, program) {
            let line = args.join(" ");
            let argv = std::iter::once(program.to_string()).chain(args).collect();
            if let Err(e) = parse(argv) {
                panic!("{doc}: `{program} {line}` does not parse:\n{e}");
            }
            seen += 1;
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::command_lines;

    #[test]
    fn finds_shell_and_unit_lines_and_nothing_outside_blocks() {
        let doc =
            "scribe-server serve --outside\n```sh\nsudo -u s scribe-server init --data /d  # why\n\
                   scribe-server serve --data /d \\\n    --listen 0:1 > log\nscribe-serverx no\n\
                   cargo install --path scribe-server\nX=1 scribe-server migrate\n```\n\
                   ```ini\nExecStart=/usr/local/bin/scribe-server serve --data /e\n```\n";
        assert_eq!(
            command_lines(doc, "scribe-server"),
            vec![
                vec!["init", "--data", "/d"],
                vec!["serve", "--data", "/d", "--listen", "0:1"],
                vec!["migrate"],
                vec!["serve", "--data", "/e"],
            ]
        );
    }
}
