//! Bounded echoes of strings a user or a peer supplied.
//!
//! An error that repeats what it was given (a repository name, a branch,
//! a path over the limits, a label) repeats at most [`ECHO_CHARS`]
//! characters of it: a name of 64 KiB sent by a script or over the wire
//! must not come back as 64 KiB of error message (or twice that, once in
//! the message and once in its cause). Every refusal that quotes such a
//! string quotes it through [`echo`]:
//!
//! ```
//! use scribe_format::echo::echo;
//! assert_eq!(echo("game").to_string(), "\"game\"");
//! let long = "x".repeat(65_536);
//! let shown = format!("no repository {}", echo(&long));
//! assert!(shown.ends_with(&format!("{}\"… (65536 bytes)", "x".repeat(64))));
//! ```

use std::fmt;

/// Characters of a supplied string an error repeats.
pub const ECHO_CHARS: usize = 64;

/// A supplied string as an error quotes it: in full when it has at most
/// [`ECHO_CHARS`] characters, else its first [`ECHO_CHARS`] then
/// `… (N bytes)`. Quoted and escaped like `{:?}` (control characters are
/// shown, never sent to the terminal).
#[derive(Clone, Copy)]
pub struct Echo<'a>(&'a str);

/// `s` bounded for an error message ([`Echo`]).
pub fn echo(s: &str) -> Echo<'_> {
    Echo(s)
}

impl Echo<'_> {
    /// The part that is shown, and whether it is all of it.
    fn shown(&self) -> (&str, bool) {
        match self.0.char_indices().nth(ECHO_CHARS) {
            Some((cut, _)) => (&self.0[..cut], false),
            None => (self.0, true),
        }
    }
}

impl fmt::Display for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shown() {
            (all, true) => write!(f, "{all:?}"),
            (head, false) => write!(f, "{head:?}… ({} bytes)", self.0.len()),
        }
    }
}

impl fmt::Debug for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_quoted_whole() {
        assert_eq!(echo("").to_string(), "\"\"");
        assert_eq!(echo("a\nb").to_string(), "\"a\\nb\"");
        let exactly = "é".repeat(ECHO_CHARS);
        assert_eq!(echo(&exactly).to_string(), format!("{exactly:?}"));
    }

    #[test]
    fn long_strings_are_cut_at_a_character_and_sized() {
        let long = "é".repeat(ECHO_CHARS + 1);
        let shown = echo(&long).to_string();
        assert_eq!(
            shown,
            format!("{:?}… ({} bytes)", "é".repeat(ECHO_CHARS), long.len())
        );
        let huge = "\u{1b}".repeat(1 << 20);
        assert!(echo(&huge).to_string().len() < 1024);
    }
}
