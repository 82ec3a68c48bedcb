//! The `scribe-auth` binary: the offline commands of the auth data
//! directory (`docs/auth.md`). The network service (`serve`) comes later.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use scribe_auth::rows::CaFamily;
use scribe_auth::{dir, AuthDir, AuthError, InitOptions, Password};
use scribe_format::{runtime, ErrorKind};

/// The program name its pid file (`scribe-auth.pid`) is named after.
const PROGRAM: &str = "scribe-auth";

/// scribe-auth: users, passwords, credentials and grants for Scribe servers.
#[derive(Parser)]
#[command(name = "scribe-auth", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create an auth directory, its certificate authorities and the bootstrap administrator.
    Init {
        /// The auth directory to create.
        #[arg(long)]
        data: PathBuf,
        /// The password pepper (created with 32 random bytes if absent; keep it outside backups).
        #[arg(long)]
        pepper_file: PathBuf,
        /// The revision witness (must not exist; keep it outside the directory and its backups).
        #[arg(long)]
        witness_file: PathBuf,
        /// The trust domain named in every certificate.
        #[arg(long)]
        trust_domain: String,
        /// The administrator's password (first line); generated and printed once if absent.
        #[arg(long)]
        admin_password_file: Option<PathBuf>,
        /// The administrator's username.
        #[arg(long, default_value = "admin")]
        admin_user: String,
        /// Write the administrator's never-expiring credential (certificate and private key PEM) here.
        #[arg(long)]
        admin_credential_file: Option<PathBuf>,
    },
    /// Print the trust anchor: every credential CA certificate (PEM).
    CaCert {
        #[arg(long)]
        data: PathBuf,
        /// Print the access CA (the service's TLS) instead of the credential CA.
        #[arg(long)]
        access: bool,
    },
    /// Copy auth.redb and the marker into a new directory (never the pepper or the witness).
    Backup {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        to: PathBuf,
    },
    /// Make a new auth directory from a backup: a new incarnation; the witness is rewritten.
    Restore {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        from: PathBuf,
        #[arg(long)]
        pepper_file: PathBuf,
        #[arg(long)]
        witness_file: PathBuf,
    },
    /// Run the auth service: SAU2 over TLS (login, whoami, logout).
    Serve {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        pepper_file: PathBuf,
        #[arg(long)]
        witness_file: PathBuf,
        /// HOST:PORT to listen on; port 0 picks a free port.
        #[arg(long)]
        listen: String,
        /// Where to write `listen` and `scribe-auth.pid` once listening.
        #[arg(long)]
        runtime_dir: Option<PathBuf>,
        /// Another host name or address for the TLS certificate (repeatable).
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Most simultaneous connections.
        #[arg(long, default_value_t = scribe_auth::service::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
        /// Session lifetime in seconds.
        #[arg(long, default_value_t = scribe_auth::service::DEFAULT_SESSION_MS / 1000)]
        session_secs: u64,
    },
    /// Convert a schema 3 directory to schema 4.
    Migrate {
        #[arg(long)]
        data: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[{}]: {e}", e.code());
            match e.code().kind() {
                ErrorKind::Usage => ExitCode::from(2),
                _ => ExitCode::from(1),
            }
        }
    }
}

fn write_private(path: &Path, text: &str) -> Result<(), AuthError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path).map_err(|e| AuthError::Io {
        path: path.to_owned(),
        source: e,
    })?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| AuthError::Io {
            path: path.to_owned(),
            source: e,
        })
}

fn run(command: Command) -> Result<(), AuthError> {
    match command {
        Command::Init {
            data,
            pepper_file,
            witness_file,
            trust_domain,
            admin_password_file,
            admin_user,
            admin_credential_file,
        } => {
            let admin_password = admin_password_file
                .as_deref()
                .map(Password::from_file)
                .transpose()?;
            if let Some(path) = &admin_credential_file {
                if path.exists() {
                    return Err(AuthError::Invalid {
                        what: "--admin-credential-file",
                        reason: format!("{} exists already", path.display()),
                    });
                }
            }
            let (dir, report) = AuthDir::init(InitOptions {
                data,
                pepper_file,
                witness_file,
                trust_domain,
                admin_username: admin_user,
                admin_password,
                now_ms: scribe_auth::now_ms(),
            })?;
            if let Some(path) = &admin_credential_file {
                write_private(
                    path,
                    &format!(
                        "{}{}",
                        report.admin_certificate_pem, report.admin_private_key_pem
                    ),
                )?;
            }
            println!(
                "initialized {} (incarnation {}, trust domain {})",
                dir.data().display(),
                report.incarnation,
                dir.trust_domain()
            );
            println!(
                "administrator: {} ({})",
                report.admin_username, report.admin_id
            );
            if let Some(p) = &report.generated_password {
                println!("administrator password (shown once): {}", p.expose());
            }
            Ok(())
        }
        Command::CaCert { data, access } => {
            let family = if access {
                CaFamily::Access
            } else {
                CaFamily::Credential
            };
            print!("{}", dir::ca_cert(&data, family)?);
            Ok(())
        }
        Command::Backup { data, to } => {
            let rows = dir::backup(&data, &to)?;
            println!("backed up {rows} rows to {}", to.display());
            Ok(())
        }
        Command::Restore {
            data,
            from,
            pepper_file,
            witness_file,
        } => {
            let d = dir::restore(&data, &from, &pepper_file, &witness_file)?;
            println!(
                "restored {} from {} (new incarnation {}, revision {})",
                d.data().display(),
                from.display(),
                d.incarnation(),
                d.revision()
            );
            Ok(())
        }
        Command::Migrate { data } => dir::migrate(&data),
        Command::Serve {
            data,
            pepper_file,
            witness_file,
            listen,
            runtime_dir,
            hosts,
            max_connections,
            session_secs,
        } => {
            // Runtime files a killed service left: gone now if its process
            // is, so nothing reads a dead address while this one opens; a
            // running pid's are left until the directory's LOCK is ours (it
            // may be the service that holds it, which the open then names).
            let found = match runtime_dir.as_deref() {
                Some(rt) => clear_stale_runtime(rt)?,
                None => None,
            };
            let d = AuthDir::open(&data, &pepper_file, &witness_file)?;
            if let (Some(rt), Some(l)) = (runtime_dir.as_deref(), found) {
                eprintln!(
                    "scribe-auth: replacing runtime files in {} ({l}): that process does not \
                     serve this auth directory",
                    rt.display()
                );
                runtime::clear(rt, PROGRAM).map_err(|source| AuthError::Io {
                    path: rt.to_owned(),
                    source,
                })?;
            }
            #[cfg(unix)]
            if let Some(rt) = runtime_dir.clone() {
                remove_runtime_files_on_signal(rt)?;
            }
            scribe_auth::service::serve(
                d,
                scribe_auth::service::ServeOptions {
                    listen,
                    runtime_dir,
                    hosts,
                    max_connections: max_connections.max(1),
                    session_ms: session_secs.saturating_mul(1000).max(1000),
                },
            )
        }
    }
}

/// Remove the runtime files in `rt` a process that no longer runs left
/// (dead, a reused pid, a garbage pid file), saying so; return what a
/// running one left, to be replaced once the directory is ours.
fn clear_stale_runtime(rt: &Path) -> Result<Option<runtime::Leftover>, AuthError> {
    let Some(l) = runtime::leftover(rt, PROGRAM) else {
        return Ok(None);
    };
    if l.alive() {
        return Ok(Some(l));
    }
    runtime::clear(rt, PROGRAM).map_err(|source| AuthError::Io {
        path: rt.to_owned(),
        source,
    })?;
    eprintln!(
        "scribe-auth: removed stale runtime files in {} ({l}): the service that wrote them \
         did not stop cleanly",
        rt.display()
    );
    Ok(None)
}

/// On SIGTERM or SIGINT, remove the runtime files `serve` wrote (`listen`,
/// `scribe-auth.pid`: their presence says the service runs) and end the
/// process, as `scribe-server` does. Every change the service acknowledged
/// is committed already (each is its own durable transaction).
#[cfg(unix)]
fn remove_runtime_files_on_signal(rt: PathBuf) -> Result<(), AuthError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).map_err(|source| AuthError::Io {
            path: rt.clone(),
            source,
        })?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let _ = runtime::clear(&rt, PROGRAM);
                eprintln!("scribe-auth: signal {sig}, stopped");
                std::process::exit(0);
            }
        })
        .map_err(|source| AuthError::Io {
            path: PathBuf::from("(signal thread)"),
            source,
        })?;
    Ok(())
}

/// Every `scribe-auth` command line README.md and docs/deploy.md show is one
/// this build's argument parser accepts.
#[cfg(test)]
mod deploy_doc {
    use clap::Parser;

    #[test]
    fn every_documented_command_line_parses() {
        let seen = scribe_testkit::docs::parse_documented_commands("scribe-auth", |argv| {
            super::Cli::try_parse_from(argv).map(drop)
        });
        assert!(seen >= 6, "only {seen} command lines found");
    }
}
