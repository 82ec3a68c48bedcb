//! What is generated from the argument declarations: shell completions,
//! the man page, and the command reference in `docs/cli.md` (between the
//! `BEGIN/END GENERATED REFERENCE` markers, checked by a test; run the
//! tests with `SCRIBE_BLESS=1` to rewrite it after changing an argument).

use crate::args::Shell;
use crate::ctx::Ctx;
use crate::error::{CliError, CliResult};

/// `scribe completions SHELL`.
pub fn completions(ctx: &Ctx, shell: Shell) -> CliResult {
    use clap_complete::shells;
    let mut cmd = crate::command();
    let mut buf = Vec::new();
    match shell {
        Shell::Bash => clap_complete::generate(shells::Bash, &mut cmd, "scribe", &mut buf),
        Shell::Zsh => clap_complete::generate(shells::Zsh, &mut cmd, "scribe", &mut buf),
        Shell::Fish => clap_complete::generate(shells::Fish, &mut cmd, "scribe", &mut buf),
        Shell::Elvish => clap_complete::generate(shells::Elvish, &mut cmd, "scribe", &mut buf),
        Shell::Powershell => {
            clap_complete::generate(shells::PowerShell, &mut cmd, "scribe", &mut buf)
        }
    }
    ctx.out.raw(&buf)
}

/// `scribe man`: the man page in roff.
pub fn man(ctx: &Ctx) -> CliResult {
    let mut buf = Vec::new();
    clap_mangen::Man::new(crate::command())
        .render(&mut buf)
        .map_err(CliError::from)?;
    ctx.out.raw(&buf)
}

/// The Markdown reference of every command.
#[cfg(test)]
pub fn markdown() -> String {
    let mut out = String::new();
    let mut cmd = crate::command();
    cmd.build();
    write_command(&mut out, &cmd, "scribe");
    out
}

#[cfg(test)]
fn write_command(out: &mut String, cmd: &clap::Command, path: &str) {
    use std::fmt::Write as _;
    if cmd.is_hide_set() {
        return;
    }
    let _ = writeln!(out, "### `{path}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim());
    }
    let mut usage = cmd.clone().bin_name(path).render_usage().to_string();
    usage = usage.trim_start_matches("Usage: ").to_string();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .filter(|a| !(a.is_global_set() && path != "scribe"))
        .collect();
    if !args.is_empty() {
        for a in args {
            let name = match (a.get_long(), a.get_short()) {
                (Some(l), Some(s)) => format!("-{s}, --{l}"),
                (Some(l), None) => format!("--{l}"),
                (None, Some(s)) => format!("-{s}"),
                (None, None) => format!(
                    "<{}>",
                    a.get_value_names()
                        .and_then(|v| v.first())
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| a.get_id().to_string().to_uppercase())
                ),
            };
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let _ = writeln!(out, "- `{name}`: {help}");
        }
        let _ = writeln!(out);
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        write_command(out, sub, &format!("{path} {}", sub.get_name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- BEGIN GENERATED REFERENCE (scribe-client/cli/src/reference.rs) -->\n";
    const END: &str = "<!-- END GENERATED REFERENCE -->";

    /// `docs/cli.md` holds exactly the reference the arguments produce,
    /// so a changed argument shows up in review as a changed document.
    #[test]
    fn docs_cli_md_holds_the_generated_reference() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
        let doc = std::fs::read_to_string(path).expect("docs/cli.md");
        let (before, rest) = doc.split_once(BEGIN).expect("the BEGIN marker");
        let (current, after) = rest.split_once(END).expect("the END marker");
        let want = markdown();
        if std::env::var_os("SCRIBE_BLESS").is_some() {
            std::fs::write(path, format!("{before}{BEGIN}{want}{END}{after}")).expect("write");
            return;
        }
        assert!(
            current == want,
            "docs/cli.md is out of date; rerun with SCRIBE_BLESS=1"
        );
    }

    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.get_about().is_none() && cmd.get_name() != "help" {
                missing.push(path.to_string());
            }
            for a in cmd.get_arguments() {
                if a.get_help().is_none() && a.get_id() != "help" && a.get_id() != "version" {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut cmd = crate::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "scribe", &mut missing);
        assert!(missing.is_empty(), "without help text: {missing:?}");
    }

    #[test]
    fn completions_and_man_page_name_every_command() {
        let mut buf = Vec::new();
        clap_complete::generate(
            clap_complete::shells::Bash,
            &mut crate::command(),
            "scribe",
            &mut buf,
        );
        let bash = String::from_utf8(buf).unwrap();
        let mut man = Vec::new();
        clap_mangen::Man::new(crate::command())
            .render(&mut man)
            .unwrap();
        let man = String::from_utf8(man).unwrap();
        for sub in crate::command().get_subcommands() {
            assert!(bash.contains(sub.get_name()), "{}", sub.get_name());
            assert!(man.contains(sub.get_name()), "{}", sub.get_name());
        }
    }
}
