//! Audit arguments: the request arguments after the verb, joined by spaces
//! and truncated to 1,024 bytes; a public key is shown as `key:<key id>`;
//! a password never appears.
//!
//! A password cannot become an argument: [`AuditArg`] is made only from a
//! `&str` word or a [`KeyId`], and [`crate::Password`] offers no string
//! view except [`crate::Password::expose`] (for showing a generated password
//! once). As a second wall, an administrative transaction remembers every
//! password it hashed and withholds the arguments of its audit row when one
//! of them appears in them (`[arguments withheld: they contained a password]`).

use crate::ids::KeyId;

/// Longest audit argument text, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 1024;

/// What an audit row shows when its arguments contained a password.
pub const WITHHELD: &str = "[arguments withheld: they contained a password]";

/// One audit argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditArg(Inner);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Inner {
    Word(String),
    Key(KeyId),
}

impl AuditArg {
    /// A plain argument (a name, a flag, a role).
    pub fn word(text: &str) -> AuditArg {
        AuditArg(Inner::Word(text.to_owned()))
    }

    /// A public key, shown as `key:<key id>`.
    pub fn key(key_id: KeyId) -> AuditArg {
        AuditArg(Inner::Key(key_id))
    }
}

/// The arguments as stored: joined by spaces, at most 1,024 bytes (cut at a
/// character boundary).
pub fn render(args: &[AuditArg]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match &arg.0 {
            Inner::Word(w) => out.push_str(w),
            Inner::Key(k) => {
                out.push_str("key:");
                out.push_str(&k.hex());
            }
        }
        if out.len() > MAX_ARGUMENT_BYTES {
            break;
        }
    }
    truncate(&mut out, MAX_ARGUMENT_BYTES);
    out
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}
