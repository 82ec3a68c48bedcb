//! Server URLs: `scribe://HOST:PORT` (plain TCP), `scribes://HOST:PORT`
//! (TLS), or a data root (`file:///abs/path` or a plain path), which the
//! client serves in-process.

use std::path::PathBuf;

use crate::client::ClientError;

/// Where a server URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerUrl {
    /// A server on the network, with or without TLS.
    Tcp { host: String, port: u16, tls: bool },
    /// A data root this process serves itself.
    Path(PathBuf),
}

impl ServerUrl {
    /// Parse a server URL.
    pub fn parse(url: &str) -> Result<ServerUrl, ClientError> {
        let bad = |reason: &str| ClientError::Url {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("scribe://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("scribes://") {
            (true, r)
        } else if let Some(p) = url.strip_prefix("file://") {
            if !p.starts_with('/') {
                return Err(bad("a file URL needs an absolute path (file:///...)"));
            }
            return Ok(ServerUrl::Path(PathBuf::from(p)));
        } else if url.contains("://") {
            return Err(bad("use scribe://, scribes://, file:// or a path"));
        } else if url.is_empty() {
            return Err(bad("empty"));
        } else {
            return Ok(ServerUrl::Path(PathBuf::from(url)));
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("expected HOST:PORT"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        let ipv6 = "an IPv6 address is written in brackets: [ADDRESS]:PORT";
        let host = match host.strip_prefix('[') {
            Some(inner) => {
                let inner = inner.strip_suffix(']').ok_or_else(|| bad(ipv6))?;
                inner
                    .parse::<std::net::Ipv6Addr>()
                    .map_err(|_| bad("not an IPv6 address between [ and ]"))?;
                inner
            }
            None if host.contains([':', '[', ']']) => return Err(bad(ipv6)),
            None => host,
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if !host.contains(':')
            && !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        {
            return Err(bad(
                "the host is a name of letters, digits, '-', '.' and '_', or an IP address",
            ));
        }
        Ok(ServerUrl::Tcp {
            host: host.to_string(),
            port,
            tls,
        })
    }

    /// The URL with a relative data-root path made absolute, so a
    /// workspace can use it from any directory.
    pub fn absolute(url: &str) -> Result<String, ClientError> {
        match ServerUrl::parse(url)? {
            ServerUrl::Path(p) => std::path::absolute(&p)
                .map(|p| p.display().to_string())
                .map_err(ClientError::io(format!("resolving {}", p.display()))),
            ServerUrl::Tcp { .. } => Ok(url.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_to_their_transport() {
        assert_eq!(
            ServerUrl::parse("scribe://host:7070").unwrap(),
            ServerUrl::Tcp {
                host: "host".into(),
                port: 7070,
                tls: false
            }
        );
        assert_eq!(
            ServerUrl::parse("scribes://[::1]:1/").unwrap(),
            ServerUrl::Tcp {
                host: "::1".into(),
                port: 1,
                tls: true
            }
        );
        assert_eq!(
            ServerUrl::parse("file:///srv/s").unwrap(),
            ServerUrl::Path("/srv/s".into())
        );
        assert_eq!(
            ServerUrl::parse("rel/dir").unwrap(),
            ServerUrl::Path("rel/dir".into())
        );
        for bad in [
            "",
            "http://x:1",
            "file://rel",
            "scribe://host",
            "scribe://:1",
            "scribe://h:x",
            "scribe://[::1",
            "scribe://[::1:7070",
            "scribe://::1:7070",
            "scribe://[nope]:7070",
            "scribe://ho st:7070",
            "scribe://h/x:7070",
        ] {
            assert!(
                matches!(ServerUrl::parse(bad), Err(ClientError::Url { .. })),
                "{bad:?}"
            );
        }
    }
}
