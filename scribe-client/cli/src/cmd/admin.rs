//! `scribe admin ...`: the administrative verbs of the auth service
//! (`docs/auth.md#administration`), with the stored login or
//! `$SCRIBE_CREDENTIAL`.

use std::path::PathBuf;

use scribe_client::auth::{AuthService, Credential};
use scribe_client::auth_admin::{generate_password, write_credential, AutomationOutcome};
use scribe_format::ErrorCode;

use crate::args::{
    AdminAutomationCmd, AdminCmd, AdminCredentialCmd, AdminGrantCmd, AdminNamespaceCmd,
    AdminUserCmd, AdminVisibilityCmd, AuditOutcome, AutomationKind, GrantRole, NamespaceRole,
    Visibility,
};
use crate::cmd::auth::{config_dir, read_file, stored};
use crate::ctx::Ctx;
use crate::error::{CliError, CliResult};
use crate::ui::{printable, utc, Json};

struct Session {
    service: AuthService,
    credential: Credential,
}

impl Session {
    fn open() -> CliResult<Session> {
        let dir = config_dir()?;
        let (service, credential) = stored(&dir)?;
        Ok(Session {
            service,
            credential,
        })
    }

    fn call(&self, verb: &str, args: &[&str]) -> CliResult<Vec<Vec<String>>> {
        Ok(self.service.admin(&self.credential, verb, args)?)
    }
}

fn role_text(r: GrantRole) -> &'static str {
    match r {
        GrantRole::Reader => "reader",
        GrantRole::Writer => "writer",
        GrantRole::Maintainer => "maintainer",
        GrantRole::Admin => "admin",
    }
}

fn namespace_role_text(r: NamespaceRole) -> &'static str {
    match r {
        NamespaceRole::Admin => "admin",
        NamespaceRole::Reader => "reader",
        NamespaceRole::Delegate => "delegate",
    }
}

fn kind_text(k: AutomationKind) -> &'static str {
    match k {
        AutomationKind::Automation => "automation",
        AutomationKind::AutomationWrite => "automation-write",
        AutomationKind::AutomationMaintain => "automation-maintain",
        AutomationKind::AutomationAdmin => "automation-admin",
    }
}

/// `N` followed by `s`, `m`, `h` or `d` (a bare number is seconds), in ms.
pub fn parse_duration_ms(text: &str) -> CliResult<u64> {
    let bad = || {
        CliError::new(
            ErrorCode::Usage,
            format!("{text:?} is not a duration: N followed by s, m, h or d (for example 30d)"),
        )
    };
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs * 1000)
        .filter(|&ms| ms > 0)
        .ok_or_else(bad)
}

/// The first line of a password file.
fn password_from(file: &PathBuf) -> CliResult<String> {
    let text = read_file(file)?;
    let pw = text.lines().next().unwrap_or("").to_owned();
    if pw.is_empty() {
        return Err(CliError::new(
            ErrorCode::Usage,
            "the password file is empty",
        ));
    }
    Ok(pw)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Print `rows` as JSON objects with `names`, or as tab-free text lines.
fn table(ctx: &Ctx, rows: &[Vec<String>], names: &[&'static str]) -> CliResult {
    if ctx.out.json {
        let items = rows
            .iter()
            .map(|r| {
                Json::obj(
                    names
                        .iter()
                        .zip(r.iter())
                        .map(|(n, v)| (*n, Json::str(v.as_str())))
                        .collect(),
                )
            })
            .collect();
        return ctx.out.json(&Json::Arr(items));
    }
    for r in rows {
        let fields: Vec<String> = r.iter().map(|f| printable(f).into_owned()).collect();
        ctx.out.line(fields.join("  "))?;
    }
    Ok(())
}

fn done(ctx: &Ctx, text: String, json: Vec<(&'static str, Json)>) -> CliResult {
    if ctx.out.json {
        ctx.out.json(&Json::obj(json))
    } else {
        ctx.out.line(text)
    }
}

pub fn run(ctx: &Ctx, cmd: AdminCmd) -> CliResult {
    let s = Session::open()?;
    match cmd {
        AdminCmd::User(u) => user(ctx, &s, u),
        AdminCmd::Grant(g) => grant(ctx, &s, g),
        AdminCmd::Namespace(n) => namespace(ctx, &s, n),
        AdminCmd::Visibility(v) => visibility(ctx, &s, v),
        AdminCmd::Credential(c) => credential(ctx, &s, c),
        AdminCmd::Automation(a) => automation(ctx, &s, a),
        AdminCmd::Audit {
            limit,
            before,
            command,
            user,
            outcome,
        } => {
            let mut filters = vec![format!("limit={limit}")];
            if let Some(b) = before {
                filters.push(format!("before={b}"));
            }
            if let Some(c) = command {
                filters.push(format!("command={c}"));
            }
            if let Some(u) = user {
                filters.push(format!("user={u}"));
            }
            if let Some(o) = outcome {
                filters.push(
                    match o {
                        AuditOutcome::Ok => "outcome=ok",
                        AuditOutcome::Rejected => "outcome=rejected",
                    }
                    .to_owned(),
                );
            }
            let args: Vec<&str> = filters.iter().map(String::as_str).collect();
            let rows = s.call("audit", &args)?;
            if ctx.out.json {
                let items = rows
                    .iter()
                    .filter(|r| r.len() == 8)
                    .map(|r| {
                        Json::obj(vec![
                            ("sequence", Json::Num(r[0].parse().unwrap_or(0))),
                            ("unix_ms", Json::Num(r[1].parse().unwrap_or(0))),
                            ("actor_id", Json::str(r[2].as_str())),
                            ("actor", Json::str(r[3].as_str())),
                            ("command", Json::str(r[4].as_str())),
                            ("operation", Json::str(r[5].as_str())),
                            ("outcome", Json::str(r[6].as_str())),
                            ("arguments", Json::str(r[7].as_str())),
                        ])
                    })
                    .collect();
                return ctx.out.json(&Json::Arr(items));
            }
            for r in rows.iter().filter(|r| r.len() == 8) {
                let when = r[1].parse().map(utc).unwrap_or_default();
                let actor = if r[3].is_empty() { "-" } else { r[3].as_str() };
                ctx.out.line(format_args!(
                    "{:>6}  {when}  {actor}  {}  {}  {}",
                    r[0],
                    r[4],
                    r[6],
                    printable(&r[7])
                ))?;
            }
            Ok(())
        }
    }
}

fn user(ctx: &Ctx, s: &Session, cmd: AdminUserCmd) -> CliResult {
    match cmd {
        AdminUserCmd::Add {
            name,
            admin,
            service,
            password_file,
        } => {
            let (password, generated) = match &password_file {
                Some(f) => (password_from(f)?, false),
                None if service => (String::new(), false),
                None => (generate_password()?, true),
            };
            let rows = s.call(
                "user-add",
                &[
                    &name,
                    &password,
                    if admin { "true" } else { "false" },
                    if service { "service" } else { "person" },
                ],
            )?;
            let id = rows
                .first()
                .and_then(|r| r.first())
                .cloned()
                .unwrap_or_default();
            let mut json = vec![("user", Json::str(&name)), ("user_id", Json::str(&id))];
            if generated {
                json.push(("password", Json::str(&password)));
            }
            if ctx.out.json {
                return ctx.out.json(&Json::obj(json));
            }
            ctx.out.line(format_args!("added user {name} ({id})"))?;
            if generated {
                ctx.out.line(format_args!(
                    "password (shown once; give it to {name} over a safe channel): {password}"
                ))?;
            }
            Ok(())
        }
        AdminUserCmd::Disable { name } => {
            s.call("user-disable", &[&name])?;
            done(
                ctx,
                format!("disabled user {name}"),
                vec![("user", Json::str(&name)), ("enabled", Json::Bool(false))],
            )
        }
        AdminUserCmd::Enable { name } => {
            s.call("user-enable", &[&name])?;
            done(
                ctx,
                format!("enabled user {name}"),
                vec![("user", Json::str(&name)), ("enabled", Json::Bool(true))],
            )
        }
        AdminUserCmd::SetPassword {
            name,
            password_file,
        } => {
            let (password, generated) = match &password_file {
                Some(f) => (password_from(f)?, false),
                None => (generate_password()?, true),
            };
            let rows = s.call("user-set-password", &[&name, &password])?;
            let (generation, ended) = match rows.first().map(Vec::as_slice) {
                Some([g, e]) => (g.clone(), e.clone()),
                _ => (String::new(), String::new()),
            };
            let mut json = vec![
                ("user", Json::str(&name)),
                ("generation", Json::Num(generation.parse().unwrap_or(0))),
                ("sessions_ended", Json::Num(ended.parse().unwrap_or(0))),
            ];
            if generated {
                json.push(("password", Json::str(&password)));
            }
            if ctx.out.json {
                return ctx.out.json(&Json::obj(json));
            }
            ctx.out.line(format_args!(
                "set the password of {name} (generation {generation}; {ended} session(s) ended)"
            ))?;
            if generated {
                ctx.out
                    .line(format_args!("password (shown once): {password}"))?;
            }
            Ok(())
        }
        AdminUserCmd::List => {
            let rows = s.call("user-list", &[])?;
            table(
                ctx,
                &rows,
                &[
                    "user",
                    "user_id",
                    "enabled",
                    "administrator",
                    "kind",
                    "password_generation",
                ],
            )
        }
    }
}

fn grant(ctx: &Ctx, s: &Session, cmd: AdminGrantCmd) -> CliResult {
    const NAMES: [&str; 4] = ["namespace", "repository", "user", "role"];
    match cmd {
        AdminGrantCmd::Set {
            namespace,
            repository,
            user,
            role,
        } => {
            let rows = s.call(
                "grant-set",
                &[&namespace, &repository, &user, role_text(role)],
            )?;
            if ctx.out.json {
                return table(ctx, &rows, &NAMES);
            }
            ctx.out.line(format_args!(
                "{user} is {} of {namespace}/{repository}",
                role_text(role)
            ))
        }
        AdminGrantCmd::Revoke {
            namespace,
            repository,
            user,
        } => {
            let rows = s.call("grant-revoke", &[&namespace, &repository, &user])?;
            if ctx.out.json {
                return table(ctx, &rows, &NAMES);
            }
            ctx.out.line(format_args!(
                "revoked the grant of {user} on {namespace}/{repository}"
            ))
        }
        AdminGrantCmd::List {
            namespace,
            repository,
        } => {
            let mut args = vec![namespace.as_str()];
            if let Some(r) = &repository {
                args.push(r);
            }
            let rows = s.call("grant-list", &args)?;
            table(
                ctx,
                &rows,
                &["namespace", "repository", "user", "user_id", "role"],
            )
        }
    }
}

fn namespace(ctx: &Ctx, s: &Session, cmd: AdminNamespaceCmd) -> CliResult {
    match cmd {
        AdminNamespaceCmd::Add {
            namespace,
            role,
            user,
        } => {
            let r = namespace_role_text(role);
            s.call("namespace-add", &[&namespace, r, &user])?;
            done(
                ctx,
                format!("{user} is {r} of namespace {namespace}"),
                vec![
                    ("namespace", Json::str(&namespace)),
                    ("role", Json::str(r)),
                    ("user", Json::str(&user)),
                ],
            )
        }
        AdminNamespaceCmd::Remove {
            namespace,
            role,
            user,
        } => {
            let r = namespace_role_text(role);
            s.call("namespace-remove", &[&namespace, r, &user])?;
            done(
                ctx,
                format!("{user} is no longer {r} of namespace {namespace}"),
                vec![
                    ("namespace", Json::str(&namespace)),
                    ("role", Json::str(r)),
                    ("user", Json::str(&user)),
                ],
            )
        }
        AdminNamespaceCmd::List { namespace } => {
            let args: Vec<&str> = namespace.iter().map(String::as_str).collect();
            let rows = s.call("namespace-list", &args)?;
            table(ctx, &rows, &["namespace", "role", "user", "user_id"])
        }
    }
}

fn visibility(ctx: &Ctx, s: &Session, cmd: AdminVisibilityCmd) -> CliResult {
    let (rows, namespace, repository) = match cmd {
        AdminVisibilityCmd::Set {
            namespace,
            repository,
            visibility,
        } => {
            let v = match visibility {
                Visibility::Public => "public",
                Visibility::Private => "private",
            };
            (
                s.call("visibility-set", &[&namespace, &repository, v])?,
                namespace,
                repository,
            )
        }
        AdminVisibilityCmd::Show {
            namespace,
            repository,
        } => (
            s.call("visibility-get", &[&namespace, &repository])?,
            namespace,
            repository,
        ),
    };
    let (v, revision) = match rows.first().map(Vec::as_slice) {
        Some([v, r]) => (v.clone(), r.clone()),
        _ => return Err(CliError::new(ErrorCode::Malformed, "visibility answer")),
    };
    done(
        ctx,
        format!("{namespace}/{repository} is {v} (visibility revision {revision})"),
        vec![
            ("namespace", Json::str(&namespace)),
            ("repository", Json::str(&repository)),
            ("visibility", Json::str(&v)),
            ("revision", Json::Num(revision.parse().unwrap_or(0))),
        ],
    )
}

/// How a `credential-list` row stands, as the auth service refuses or
/// accepts it now (its eleventh field; from its stored `enabled` flag
/// when an older service sent ten). A state this build does not know (a
/// newer service's, or a hostile reply) is shown as such, escaped and cut
/// to 64 characters, never as `enabled`.
fn credential_state_text(r: &[String]) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    match r.get(10).map(String::as_str) {
        Some("enabled") => Cow::Borrowed("enabled"),
        Some("revoked") => Cow::Borrowed("revoked"),
        Some("expired") => Cow::Borrowed("expired"),
        Some("user-disabled") => Cow::Borrowed("disabled (user disabled)"),
        Some(other) => {
            let cut: String = other.chars().take(64).collect();
            let more = if cut.len() < other.len() { "..." } else { "" };
            Cow::Owned(format!(
                "unknown state \"{}{more}\" (not known to this scribe: treat it as not usable; \
                 a newer scribe may know it)",
                printable(&cut)
            ))
        }
        None if r.get(4).is_some_and(|e| e == "true") => Cow::Borrowed("enabled"),
        None => Cow::Borrowed("revoked"),
    }
}

fn credential(ctx: &Ctx, s: &Session, cmd: AdminCredentialCmd) -> CliResult {
    match cmd {
        AdminCredentialCmd::List { user } => {
            let args: Vec<&str> = user.iter().map(String::as_str).collect();
            let rows = s.call("credential-list", &args)?;
            if ctx.out.json {
                return table(
                    ctx,
                    &rows,
                    &[
                        "credential",
                        "kind",
                        "subject",
                        "expires_ms",
                        "enabled",
                        "label",
                        "created_ms",
                        "parent",
                        "generation",
                        "key_id",
                        "state",
                    ],
                );
            }
            // Ten fields from an auth service before the state was added;
            // further fields are a newer one's.
            for r in rows.iter().filter(|r| r.len() >= 10) {
                let expires = match r[3].parse::<u64>() {
                    Ok(u64::MAX) => "never".to_owned(),
                    Ok(ms) => utc(ms),
                    Err(_) => r[3].clone(),
                };
                let state = credential_state_text(r);
                let parent = if r[7].is_empty() {
                    String::new()
                } else {
                    format!("  from {}", r[7])
                };
                ctx.out.line(format_args!(
                    "{}  {}  {}  {state}  until {expires}  {}{parent}",
                    r[0],
                    r[1],
                    r[2],
                    printable(&r[5])
                ))?;
            }
            Ok(())
        }
        AdminCredentialCmd::Revoke { credential } => {
            let rows = s.call("credential-revoke", &[&credential])?;
            let ids: Vec<String> = rows
                .into_iter()
                .filter_map(|r| r.into_iter().next())
                .collect();
            if ctx.out.json {
                return ctx.out.json(&Json::obj(vec![(
                    "revoked",
                    Json::Arr(ids.iter().map(|i| Json::str(i.as_str())).collect()),
                )]));
            }
            for id in ids {
                ctx.out.line(format_args!("revoked credential {id}"))?;
            }
            Ok(())
        }
    }
}

fn automation(ctx: &Ctx, s: &Session, cmd: AdminAutomationCmd) -> CliResult {
    let (made, out) = match cmd {
        AdminAutomationCmd::Create {
            user,
            kind,
            expires_in,
            label,
            out,
        } => {
            let expires = now_ms().saturating_add(parse_duration_ms(&expires_in)?);
            let user = match user {
                Some(u) => u,
                None => s.service.whoami(&s.credential)?.username,
            };
            let made = s.service.automation_create(
                &s.credential,
                &user,
                kind_text(kind),
                expires,
                &label,
            )?;
            (made, out)
        }
        AdminAutomationCmd::Derive {
            parent,
            kind,
            expires_in,
            label,
            out,
        } => {
            let expires = now_ms().saturating_add(parse_duration_ms(&expires_in)?);
            let made = s.service.automation_derive(
                &s.credential,
                &parent,
                kind_text(kind),
                expires,
                &label,
            )?;
            (made, out)
        }
    };
    let AutomationOutcome {
        credential_id,
        username,
        kind,
        expires_ms,
        credential,
    } = made;
    write_credential(&out, &credential)?;
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("credential", Json::str(&credential_id)),
            ("user", Json::str(&username)),
            ("kind", Json::str(&kind)),
            ("expires_ms", Json::Num(expires_ms)),
            ("file", Json::str(out.display().to_string())),
        ]));
    }
    ctx.out.line(format_args!(
        "{kind} credential {credential_id} for {username} until {}, written to {}",
        utc(expires_ms),
        out.display()
    ))?;
    ctx.out
        .status(format!("use it with SCRIBE_CREDENTIAL={}", out.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::credential_state_text;

    fn row(state: Option<&str>, enabled: &str) -> Vec<String> {
        let mut r: Vec<String> = ["c", "session", "u", "0", enabled, "", "0", "", "1", "k"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        r.extend(state.map(str::to_owned));
        r
    }

    /// A credential `state` this build does not know (a newer auth
    /// service's, or a hostile reply) is named with its value, escaped and
    /// bounded, and never read as enabled, whatever the stored flag says.
    /// It printed a bare "unknown state".
    #[test]
    fn an_unknown_credential_state_is_named_not_trusted() {
        assert_eq!(
            credential_state_text(&row(Some("enabled"), "true")),
            "enabled"
        );
        assert_eq!(
            credential_state_text(&row(Some("user-disabled"), "true")),
            "disabled (user disabled)"
        );
        for (state, shown) in [
            ("suspended", "\"suspended\""),
            ("Enabled", "\"Enabled\""),
            ("", "\"\""),
            ("enabled\u{1b}[2J", "\"enabled\\u{1b}[2J\""),
            ("\u{202e}delbane", "\"\\u{202e}delbane\""),
        ] {
            let t = credential_state_text(&row(Some(state), "true"));
            assert!(
                t.starts_with(&format!("unknown state {shown} (")),
                "{state:?}: {t}"
            );
            assert!(t.contains("not usable"), "{t}");
        }
        let huge = "x".repeat(1 << 20);
        let t = credential_state_text(&row(Some(&huge), "true"));
        assert!(t.len() < 200 && t.contains("...\""), "{}", t.len());
        // An older service's ten fields: its stored flag.
        assert_eq!(credential_state_text(&row(None, "true")), "enabled");
        assert_eq!(credential_state_text(&row(None, "false")), "revoked");
    }
}
