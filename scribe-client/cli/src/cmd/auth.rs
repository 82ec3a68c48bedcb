//! `scribe login|logout|whoami`: a session with a team's auth service
//! (`docs/auth.md`). The credential lives in the user's config directory;
//! CI and agents point `SCRIBE_CREDENTIAL` at a credential file instead.

use std::io::IsTerminal;
use std::path::PathBuf;

use scribe_client::auth::{self as a, AuthClientError, AuthService};
use scribe_format::ErrorCode;

use crate::ctx::Ctx;
use crate::error::{CliError, CliResult};
use crate::ui::{utc, Json};

impl From<AuthClientError> for CliError {
    fn from(e: AuthClientError) -> CliError {
        CliError::new(e.code(), e.to_string())
    }
}

pub(crate) fn config_dir() -> CliResult<PathBuf> {
    a::config_dir().ok_or_else(|| {
        CliError::new(
            ErrorCode::Usage,
            "no config directory: set SCRIBE_CONFIG_DIR, XDG_CONFIG_HOME or HOME",
        )
    })
}

pub(crate) fn read_file(path: &PathBuf) -> CliResult<String> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::new(ErrorCode::Io, format!("reading {}: {e}", path.display())))
}

/// The password: the first line of `file`, else the terminal without
/// echo, else a line of standard input.
fn password(file: Option<PathBuf>, user: &str) -> CliResult<String> {
    let line = match file {
        Some(f) => read_file(&f)?,
        None if std::io::stdin().is_terminal() => {
            rpassword::prompt_password(format!("Password for {user}: "))
                .map_err(|e| CliError::new(ErrorCode::Io, format!("reading the password: {e}")))?
        }
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_line(&mut s)
                .map_err(|e| CliError::new(ErrorCode::Io, format!("reading the password: {e}")))?;
            s
        }
    };
    let pw = line.lines().next().unwrap_or("").to_string();
    if pw.is_empty() {
        return Err(CliError::new(ErrorCode::Usage, "the password is empty"));
    }
    Ok(pw)
}

pub fn login(
    ctx: &Ctx,
    url: Option<String>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    admin: bool,
) -> CliResult {
    let dir = config_dir()?;
    let stored = a::load_service(&dir).ok();
    let ca_pem = match (&ca_file, &stored) {
        (Some(f), _) => read_file(f)?,
        (None, Some(s)) => s.ca_pem.clone(),
        (None, None) => {
            return Err(CliError::new(
                ErrorCode::Usage,
                "the first login needs --ca-file (the auth service's CA: `scribe-auth ca-cert --access`)",
            ))
        }
    };
    let service = match (url, &stored) {
        (Some(u), _) => AuthService::new(&u, ca_pem)?,
        (None, Some(s)) => AuthService::new(&s.address, ca_pem)?,
        (None, None) => {
            return Err(CliError::new(
                ErrorCode::Usage,
                "the first login needs --auth sau2://HOST:PORT",
            ))
        }
    };
    let user = user
        .or_else(|| std::env::var("SCRIBE_AUTHOR").ok())
        .or_else(|| std::env::var("USER").ok())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CliError::new(ErrorCode::Usage, "name the user with --user"))?;
    let pw = password(password_file, &user)?;
    let outcome = if admin {
        service.admin_login(&user, &pw)?
    } else {
        service.login(&user, &pw)?
    };
    a::store_login(&dir, &service, &outcome)?;
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("user", Json::str(&outcome.username)),
            ("user_id", Json::str(&outcome.user_id)),
            ("credential", Json::str(&outcome.credential_id)),
            ("expires_ms", Json::Num(outcome.expires_ms)),
        ]));
    }
    ctx.out.line(format_args!(
        "signed in as {} until {} (credential {})",
        outcome.username,
        utc(outcome.expires_ms),
        outcome.credential_id
    ))?;
    ctx.out
        .status(format!("credential stored in {}", dir.display()));
    Ok(())
}

/// The stored login of `dir`, or `unauthenticated` saying how to sign in.
pub(crate) fn stored(dir: &std::path::Path) -> CliResult<(AuthService, a::Credential)> {
    let not_signed_in = |e: AuthClientError| match e {
        AuthClientError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            CliError::new(
                ErrorCode::Unauthenticated,
                format!("not signed in (no stored login in {})", dir.display()),
            )
            .hint("run `scribe login --auth sau2://HOST:PORT --ca-file CA.pem`")
        }
        other => other.into(),
    };
    let service = a::load_service(dir).map_err(not_signed_in)?;
    let credential = a::load_credential(dir).map_err(not_signed_in)?;
    Ok((service, credential))
}

pub fn logout(ctx: &Ctx) -> CliResult {
    let dir = config_dir()?;
    let (service, credential) = stored(&dir)?;
    service.logout(&credential)?;
    let stored = dir.join("credential.pem");
    if std::env::var_os("SCRIBE_CREDENTIAL").is_none() && stored.exists() {
        std::fs::remove_file(&stored).map_err(|e| {
            CliError::new(ErrorCode::Io, format!("removing {}: {e}", stored.display()))
        })?;
    }
    ctx.out.line("signed out")
}

pub fn whoami(ctx: &Ctx) -> CliResult {
    let dir = config_dir()?;
    let (service, credential) = stored(&dir)?;
    let who = service.whoami(&credential)?;
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("user", Json::str(&who.username)),
            ("user_id", Json::str(&who.user_id)),
            ("credential", Json::str(&who.credential_id)),
            ("kind", Json::str(&who.kind)),
            ("expires_ms", Json::Num(who.expires_ms)),
        ]));
    }
    ctx.out.line(format_args!(
        "{} (user {}), {} credential {} until {}",
        who.username,
        who.user_id,
        who.kind,
        who.credential_id,
        utc(who.expires_ms)
    ))
}
