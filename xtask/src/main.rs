//! Scribe's development tools, kept out of the product crates and run as
//! `cargo xtask TASK` (the alias in `.cargo/config.toml`). `xtask` is a
//! workspace member but not a default one: `cargo build`, `cargo test` and
//! `cargo bench` in the root never build or run it, and nothing in
//! `cargo test --workspace` runs a task (only the pure helpers' unit tests).
//!
//! - `compare`: Scribe side by side with Git, Git LFS and Subversion
//!   (`docs/performance-compare.md`); installs the peers it lacks and writes
//!   a dated report under `docs/perf/`.

mod compare;

use clap::{Parser, Subcommand};

/// Scribe's development tools (not part of the product)
#[derive(Parser, Debug)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand, Debug)]
enum Task {
    /// Measure Scribe side by side with Git, Git LFS and Subversion
    ///
    /// Every client talks to its real server on 127.0.0.1 through a
    /// counting proxy; runs are alternated and reported as medians beside
    /// the machine's own limits measured in the same run. Builds the release
    /// binaries it drives, installs the peers it measures and lacks (unless
    /// --no-install) and writes a markdown report: by default
    /// docs/perf/YYYY-MM-DD-WORKLOAD.md (a new file, never an existing
    /// one; smoke runs at another --scale go to --dir). A measurement,
    /// never a test: nothing here asserts a time.
    Compare(compare::Args),
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    // The harness's launcher (a private copy of this binary runs every
    // measured command): checked before any parsing, so it stays small.
    if raw.len() >= 4 && raw[1] == compare::LAUNCH {
        compare::launch(&raw[2..]);
    }
    let cli = Cli::parse();
    match cli.task {
        Task::Compare(args) => {
            // The arguments as given, for the report's command line.
            let given = raw.get(2..).map(<[String]>::to_vec).unwrap_or_default();
            compare::run(args, given);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn compare_takes_the_harness_flags() {
        let cli = Cli::try_parse_from([
            "xtask",
            "compare",
            "--dir",
            "/tmp/x",
            "--seed",
            "9",
            "--scale",
            "0.01",
            "--runs",
            "0",
            "--only",
            "w1s, proxy",
            "--out",
            "/tmp/x/r.md",
            "--tools",
            "git,svn",
            "--no-install",
            "--keep",
            "--cold",
            "--svn-status",
            "--estimate",
        ])
        .expect("every harness flag parses");
        let Task::Compare(a) = cli.task;
        let o = compare::Opts::from_args(a, Vec::new());
        assert_eq!(o.dir, std::path::PathBuf::from("/tmp/x"));
        assert_eq!(o.seed, 9);
        assert_eq!(o.scale, 0.01);
        assert_eq!(o.runs, Some(1), "--runs is at least 1");
        assert_eq!(o.only, ["W1S", "PROXY"]);
        assert_eq!(o.out, Some(std::path::PathBuf::from("/tmp/x/r.md")));
        assert_eq!(
            o.tools,
            [
                compare::Tool::Scribe,
                compare::Tool::Git,
                compare::Tool::Svn
            ]
        );
        assert!(!o.install && o.keep && !o.warm && o.svn_status && o.estimate);
    }

    #[test]
    fn compare_defaults_match_the_harness() {
        let Task::Compare(a) = Cli::try_parse_from(["xtask", "compare"])
            .expect("no flags")
            .task;
        let o = compare::Opts::from_args(a, Vec::new());
        assert_eq!(o.seed, 7);
        assert_eq!(o.scale, 1.0);
        assert_eq!(o.runs, None);
        assert!(o.only.is_empty());
        assert_eq!(o.out, None);
        assert_eq!(o.tools, compare::ALL);
        assert!(o.install && !o.keep && o.warm && !o.svn_status && !o.estimate);
        assert_eq!(o.dir, std::env::temp_dir().join("scribe-compare"));
    }

    #[test]
    fn compare_refuses_bad_values() {
        for bad in [
            &["--tools", "git,cvs"][..],
            &["--only", "W1,W9"],
            &["--scale", "0"],
            &["--scale", "-1"],
            &["--seed", "x"],
            &["--frobnicate"],
        ] {
            let args = ["xtask", "compare"].iter().chain(bad).copied();
            assert!(Cli::try_parse_from(args).is_err(), "{bad:?} was accepted");
        }
    }
}
