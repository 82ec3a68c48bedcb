//! `scribe quickstart --team [DIR]`: a team on loopback, with the real
//! programs a studio runs: `scribe-auth` (users, grants, credentials) and a
//! TLS `scribe-server` bound to it, and `scribe` as three people (an
//! administrator, Alice and Bob, each with their own config directory).
//! Shows sign-in, a grant, a refusal, and the grant that lifts it.
//!
//! `scribe-auth` and `scribe-server` are taken from beside this `scribe`
//! (`cargo build --release` builds all three).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scribe_format::ErrorCode;

use crate::ctx::Ctx;
use crate::error::{CliError, CliResult};
use crate::ui::Timer;

/// The processes started here; killed when the demo ends, however it ends.
struct Services(Vec<Child>);

impl Drop for Services {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn failed(what: &str, detail: impl std::fmt::Display) -> CliError {
    CliError::new(ErrorCode::Internal, format!("{what}: {detail}"))
}

/// A program beside this executable.
fn sibling(name: &str) -> CliResult<PathBuf> {
    let exe = std::env::current_exe()?;
    let p = exe
        .parent()
        .map(|d| d.join(format!("{name}{}", std::env::consts::EXE_SUFFIX)))
        .ok_or_else(|| failed("locate programs", "this executable has no directory"))?;
    if !p.exists() {
        return Err(CliError::new(
            ErrorCode::NotFound,
            format!("the team demo needs {} beside scribe", p.display()),
        )
        .hint("build all three programs: `cargo build --release`, then run target/release/scribe quickstart --team"));
    }
    Ok(p)
}

struct Team<'a> {
    ctx: &'a Ctx,
    dir: PathBuf,
    scribe: PathBuf,
    auth_bin: PathBuf,
    server_bin: PathBuf,
    step: u32,
}

impl Team<'_> {
    fn title(&mut self, t: &str) -> CliResult {
        self.step += 1;
        self.ctx.out.line(format_args!("\n== {}. {t}", self.step))?;
        Ok(())
    }

    fn config(&self, who: &str) -> PathBuf {
        self.dir.join("config").join(who)
    }

    /// Run `program args` (as `who`, for `scribe`), show its output, and
    /// return whether it succeeded.
    fn run(&self, program: &Path, who: Option<&str>, args: &[&str]) -> CliResult<(bool, String)> {
        self.run_in(program, who, None, args)
    }

    fn run_in(
        &self,
        program: &Path,
        who: Option<&str>,
        cwd: Option<&Path>,
        args: &[&str],
    ) -> CliResult<(bool, String)> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null());
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        if let Some(w) = who {
            cmd.env("SCRIBE_CONFIG_DIR", self.config(w))
                .env("SCRIBE_AUTHOR", w)
                .env_remove("SCRIBE_CREDENTIAL");
        }
        let shown = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.ctx.out.line(format_args!(
            "   {}{}$ {shown} {}",
            who.map(|w| format!("[{w}] ")).unwrap_or_default(),
            cwd.and_then(|d| d.file_name())
                .map(|d| format!("{}/ ", d.to_string_lossy()))
                .unwrap_or_default(),
            shell_words(args)
        ))?;
        let out = cmd.output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for l in text.lines().filter(|l| !l.trim().is_empty()).take(12) {
            self.ctx.out.line(format_args!("     {l}"))?;
        }
        Ok((out.status.success(), text))
    }

    fn must(&self, program: &Path, who: Option<&str>, args: &[&str]) -> CliResult<String> {
        match self.run(program, who, args)? {
            (true, text) => Ok(text),
            (false, text) => Err(failed(&args.join(" "), text.trim())),
        }
    }

    fn scribe(&self, who: &str, args: &[&str]) -> CliResult<(bool, String)> {
        self.run(&self.scribe, Some(who), args)
    }

    fn scribe_ok(&self, who: &str, args: &[&str]) -> CliResult<String> {
        self.must(&self.scribe, Some(who), args)
    }

    /// `scribe args` as `who` inside workspace `ws`.
    fn scribe_at(&self, who: &str, ws: &Path, args: &[&str]) -> CliResult<(bool, String)> {
        self.run_in(&self.scribe, Some(who), Some(ws), args)
    }

    fn scribe_at_ok(&self, who: &str, ws: &Path, args: &[&str]) -> CliResult<String> {
        match self.scribe_at(who, ws, args)? {
            (true, text) => Ok(text),
            (false, text) => Err(failed(&args.join(" "), text.trim())),
        }
    }

    /// Start a long-running program and wait for its `listen` file.
    fn start(
        &self,
        program: &Path,
        args: &[&str],
        runtime: &Path,
        env: &[(&str, PathBuf)],
    ) -> CliResult<(Child, String)> {
        start_service(program, args, runtime, env)
    }
}

/// Start a long-running program (`scribe-auth`, `scribe-server`) with
/// `--runtime-dir runtime` among its `args`, and wait until it listens:
/// until the runtime directory's pid file names the child started here
/// and its `listen` is whole. A `listen` an earlier, killed service left
/// there is not taken for this one's.
fn start_service(
    program: &Path,
    args: &[&str],
    runtime: &Path,
    env: &[(&str, PathBuf)],
) -> CliResult<(Child, String)> {
    let log = std::fs::File::create(runtime.with_extension("log"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let name = program
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(addr) = scribe_format::runtime::listen_of(runtime, &name, child.id()) {
            return Ok((child, addr));
        }
        if let Some(st) = child.try_wait()? {
            let log = std::fs::read_to_string(runtime.with_extension("log")).unwrap_or_default();
            return Err(failed(
                "a service stopped before listening",
                format!("{st}: {log}"),
            ));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed(
                "a service did not listen within 30 s",
                program.display(),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A password of 24 letters from the OS random source.
fn password() -> CliResult<String> {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| failed("random source", e))?;
    Ok(b.iter().map(|x| (b'a' + x % 26) as char).collect())
}

fn secret(dir: &Path, name: &str) -> CliResult<PathBuf> {
    let p = dir.join("secrets").join(name);
    std::fs::create_dir_all(p.parent().expect("a parent"))?;
    // Readable by its owner only, like a stored login.
    scribe_client::auth::write_private(&p, &format!("{}\n", password()?))
        .map_err(|e| CliError::new(e.code(), e.to_string()))?;
    Ok(p)
}

/// `args` as a shell line a reader can paste: a word with a space or a
/// shell metacharacter is single-quoted.
fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_alphanumeric() || "_-./:=@%+,".contains(c));
            if plain {
                (*a).to_string()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(ctx: &Ctx, dir: PathBuf) -> CliResult {
    let total = Timer::start();
    let mut t = Team {
        ctx,
        scribe: std::env::current_exe()?,
        auth_bin: sibling("scribe-auth")?,
        server_bin: sibling("scribe-server")?,
        dir: dir.clone(),
        step: 0,
    };
    let s = |p: &Path| p.display().to_string();
    let mut services = Services(Vec::new());
    ctx.out
        .line(format_args!("Scribe team quickstart in {}", dir.display()))?;

    t.title("An auth service: scribe-auth init (a CA, an administrator)")?;
    let auth = dir.join("auth");
    let pepper = dir.join("secrets/pepper");
    let witness = dir.join("secrets/auth-witness");
    let admin_pw = secret(&dir, "admin-password")?;
    t.must(
        &t.auth_bin,
        None,
        &[
            "init",
            "--data",
            &s(&auth),
            "--pepper-file",
            &s(&pepper),
            "--witness-file",
            &s(&witness),
            "--trust-domain",
            "quickstart.local",
            "--admin-user",
            "admin",
            "--admin-password-file",
            &s(&admin_pw),
        ],
    )?;
    let ca_text = t.must(
        &t.auth_bin,
        None,
        &["ca-cert", "--data", &s(&auth), "--access"],
    )?;
    let ca = dir.join("access-ca.pem");
    std::fs::write(&ca, ca_text.trim_start())?;
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir)?;
    let (auth_s, pepper_s, witness_s, auth_run) =
        (s(&auth), s(&pepper), s(&witness), s(&run_dir.join("auth")));
    let auth_serve = |listen: &str| -> Vec<String> {
        [
            "serve",
            "--data",
            &auth_s,
            "--pepper-file",
            &pepper_s,
            "--witness-file",
            &witness_s,
            "--listen",
            listen,
            "--runtime-dir",
            &auth_run,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let first: Vec<String> = auth_serve("127.0.0.1:0");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let (child, auth_addr) = t.start(&t.auth_bin, &first, &run_dir.join("auth"), &[])?;
    services.0.push(child);
    let auth_url = format!("sau2://{auth_addr}");
    // The team server knows the auth service by this address: a restart
    // listens on it again.
    let again: Vec<String> = auth_serve(&auth_addr.to_string());
    let again: Vec<&str> = std::iter::once("scribe-auth")
        .chain(again.iter().map(String::as_str))
        .collect();
    let auth_again = shell_words(&again);
    ctx.out
        .line(format_args!("   scribe-auth serves {auth_url}"))?;

    t.title("The administrator signs in and adds Alice and Bob")?;
    t.scribe_ok(
        "admin",
        &[
            "login",
            "--admin",
            "--auth",
            &auth_url,
            "--user",
            "admin",
            "--password-file",
            &s(&admin_pw),
            "--ca-file",
            &s(&ca),
        ],
    )?;
    let alice_pw = secret(&dir, "alice-password")?;
    let bob_pw = secret(&dir, "bob-password")?;
    t.scribe_ok(
        "admin",
        &[
            "admin",
            "user",
            "add",
            "alice",
            "--password-file",
            &s(&alice_pw),
        ],
    )?;
    t.scribe_ok(
        "admin",
        &[
            "admin",
            "user",
            "add",
            "bob",
            "--password-file",
            &s(&bob_pw),
        ],
    )?;

    t.title("A team server bound to it: scribe-server init, auth-init, serve (TLS)")?;
    let data = dir.join("server");
    t.must(&t.server_bin, None, &["init", "--data", &s(&data)])?;
    // auth-init registers the server with the administrator's login.
    t.must(
        &t.server_bin,
        Some("admin"),
        &[
            "auth-init",
            "--data",
            &s(&data),
            "--namespace",
            "studio",
            "--name",
            "quickstart-depot",
        ],
    )?;
    let (child, server_addr) = t.start(
        &t.server_bin,
        &[
            "serve",
            "--data",
            &s(&data),
            "--listen",
            "127.0.0.1:0",
            "--runtime-dir",
            &s(&run_dir.join("server")),
        ],
        &run_dir.join("server"),
        &[],
    )?;
    services.0.push(child);
    let url = format!("scribes://{server_addr}");
    let server_again = shell_words(&[
        "scribe-server",
        "serve",
        "--data",
        &s(&data),
        "--listen",
        &server_addr.to_string(),
        "--runtime-dir",
        &s(&run_dir.join("server")),
    ]);
    ctx.out.line(format_args!(
        "   scribe-server serves {url} to signed-in users only"
    ))?;
    t.scribe_ok("admin", &["repo", "create", "game", "--server", &url])?;

    t.title("Alice signs in; the administrator makes her a writer of studio/game")?;
    t.scribe_ok(
        "alice",
        &[
            "login",
            "--auth",
            &auth_url,
            "--user",
            "alice",
            "--password-file",
            &s(&alice_pw),
            "--ca-file",
            &s(&ca),
        ],
    )?;
    t.scribe_ok(
        "admin",
        &["admin", "grant", "set", "studio", "game", "alice", "writer"],
    )?;
    let alice = dir.join("alice");
    t.scribe_ok(
        "alice",
        &[
            "workspace",
            "create",
            &s(&alice),
            "--server",
            &url,
            "--repo",
            "game",
        ],
    )?;
    std::fs::create_dir_all(alice.join("art"))?;
    std::fs::write(alice.join("art/hero.psd"), password()?.repeat(40_000))?;
    t.scribe_at_ok("alice", &alice, &["add", "art/hero.psd"])?;
    t.scribe_at_ok("alice", &alice, &["submit", "-m", "Hero: first pass"])?;

    t.title("Bob signs in, but has no grant: the server refuses him")?;
    t.scribe_ok(
        "bob",
        &[
            "login",
            "--auth",
            &auth_url,
            "--user",
            "bob",
            "--password-file",
            &s(&bob_pw),
            "--ca-file",
            &s(&ca),
        ],
    )?;
    let bob = dir.join("bob");
    let (ok, _) = t.scribe(
        "bob",
        &[
            "workspace",
            "create",
            &s(&bob),
            "--server",
            &url,
            "--repo",
            "game",
        ],
    )?;
    if ok {
        return Err(failed(
            "the team demo",
            "Bob got a workspace without a grant",
        ));
    }
    let _ = std::fs::remove_dir_all(&bob);

    t.title("The administrator makes Bob a reader: he syncs, but may not submit")?;
    t.scribe_ok(
        "admin",
        &["admin", "grant", "set", "studio", "game", "bob", "reader"],
    )?;
    // The server keeps an auth answer until it next asks the auth service
    // whether anything changed (`scribe-server serve --auth-recheck`, 1 s).
    ctx.out
        .line("   (the server sees the new grant at its next auth check, within 1 s)")?;
    std::thread::sleep(Duration::from_millis(1500));
    t.scribe_ok(
        "bob",
        &[
            "workspace",
            "create",
            &s(&bob),
            "--server",
            &url,
            "--repo",
            "game",
        ],
    )?;
    let bob_sees = bob.join("art/hero.psd").exists();
    ctx.out.line(format_args!(
        "   Bob's workspace has art/hero.psd: {bob_sees}"
    ))?;
    std::fs::write(bob.join("notes.txt"), "bob was here\n")?;
    t.scribe_at_ok("bob", &bob, &["add", "notes.txt"])?;
    let (ok, _) = t.scribe_at("bob", &bob, &["submit", "-m", "notes"])?;
    if ok {
        return Err(failed("the team demo", "a reader's submit was accepted"));
    }

    t.title("The audit trail")?;
    t.scribe_ok("admin", &["admin", "audit", "--limit", "8"])?;

    drop(services);
    ctx.out.line(format_args!(
        "\nDone in {:.2} s. The services were stopped; everything is in {}.\n\
         Start them again (the auth service on the address the team server knows):\n\
         \x20  {auth_again} &\n\
         \x20  {server_again} &\n\
         Each person's login is in {}/NAME: for instance, in {}:\n\
         \x20  SCRIBE_CONFIG_DIR={} scribe sync\n\
         (docs/server.md, \"Team servers\").",
        total.secs(),
        dir.display(),
        t.dir.join("config").display(),
        alice.display(),
        shell_words(&[&s(&t.config("alice"))]),
    ))?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A `listen` and pid file a killed service left in the runtime
    /// directory are not taken for the new service's: the demo waits until
    /// the pid file names the child it started (it returned the dead
    /// address at once).
    #[test]
    fn a_stale_listen_file_is_not_taken_for_the_started_services() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("listen"), "127.0.0.1:1\n").unwrap();
        std::fs::write(run.join("scribe-server.pid"), "2147483000\n").unwrap();
        // A stand-in named like the service: after a while it writes its
        // pid, then its address, as serve does.
        let program = tmp.path().join("scribe-server");
        std::fs::write(
            &program,
            "#!/bin/sh\nsleep 0.3\necho $$ > \"$1/scribe-server.pid\"\n\
             echo 127.0.0.1:4242 > \"$1/listen\"\nexec sleep 30\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (mut child, addr) =
            start_service(&program, &[run.to_str().unwrap()], &run, &[]).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(addr, "127.0.0.1:4242");
    }
}
