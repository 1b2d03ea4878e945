//! Where a request says it goes (`Host`) and where a browser says it comes from (`Origin`),
//! parsed the way a browser writes them and compared as structures, never as text prefixes;
//! and the names and origins the config adds (`[server] allowed_hosts`, `cors_origins`).
//!
//! Only the spelling a browser itself sends is accepted. A browser writes the `Host` of the URL
//! it fetched in canonical form (lowercase name, dotted-decimal IPv4, compressed IPv6 in
//! brackets, no default port trick), so a value that a URL parser would rewrite — `127.1`,
//! `2130706433`, `0x7f.0.0.1`, `[0:0:0:0:0:0:0:1]`, `localhost:080`, `127.0.0.1@evil`,
//! `evil#127.0.0.1` — cannot come from a browser and is refused rather than guessed at.
//! Loopback means the name `localhost` (not `localhost.`, not `*.localhost`: those reach a
//! resolver), any IPv4 address in `127.0.0.0/8`, and `[::1]`: none of them is a DNS name an
//! attacker can point somewhere.

use redraft::config::ServerConfig;
use url::{Host, Origin, Url};

/// `HOST[:PORT]`, from a `Host` header or a request target's authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    host: Host<String>,
    port: u16,
}

impl Authority {
    /// Parse `raw` as a browser writes a `Host` header: `None` for anything else (user info, a
    /// path, a fragment, a numeric IPv4 spelling other than dotted decimal, a bad port…).
    pub fn parse(raw: &str) -> Option<Self> {
        let url = Url::parse(&format!("http://{raw}/")).ok()?;
        let name = url.host_str()?;
        let port = url.port_or_known_default()?;
        // The parser normalises and drops whatever is not a host or a port; a value that
        // survives unchanged (bar ASCII case) held nothing else.
        let canonical = raw.eq_ignore_ascii_case(name) || raw.eq_ignore_ascii_case(&format!("{name}:{port}"));
        let host = url.host()?.to_owned();
        canonical.then_some(Self { host, port })
    }

    /// A loopback name: `localhost`, `127.0.0.0/8` or `[::1]`.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Domain(name) => name == "localhost",
            Host::Ipv4(ip) => ip.is_loopback(),
            Host::Ipv6(ip) => ip.is_loopback(),
        }
    }

    /// The origin of a page this server serves under this authority (it speaks plain HTTP).
    pub fn origin(&self) -> Origin {
        Origin::Tuple("http".into(), self.host.clone(), self.port)
    }
}

/// Parse an `Origin` header: an `http` or `https` origin exactly as a browser serialises it.
/// `None` for `null` (sandboxed frames, files, redirects across origins), other schemes and
/// anything a browser would not send.
pub fn parse_origin(raw: &str) -> Option<Origin> {
    let origin = Url::parse(raw).ok()?.origin();
    let web = matches!(&origin, Origin::Tuple(scheme, _, _) if scheme == "http" || scheme == "https");
    (web && origin.ascii_serialization() == raw).then_some(origin)
}

/// An entry of `[server] allowed_hosts` or `cors_origins` that names nothing it could admit.
#[derive(Debug, thiserror::Error)]
#[error("`[server] {key}` lists `{entry}`, which {problem}\nhint: {hint}")]
pub struct AllowListError {
    key: &'static str,
    entry: String,
    problem: String,
    hint: String,
}

/// The hosts and origins a server admits besides loopback names and its own origin.
#[derive(Debug, Clone)]
pub struct Allowed {
    /// `None`: every host (tokens guard the server and `allowed_hosts` is empty).
    hosts: Option<Vec<Host<String>>>,
    /// Origins whose pages may call the API (CORS).
    origins: Vec<Origin>,
}

impl Allowed {
    /// From `[server]`: loopback names and `allowed_hosts`, or any host when the server has
    /// tokens and `allowed_hosts` is empty; the `cors_origins`.
    pub fn from_config(server: &ServerConfig, has_tokens: bool) -> Result<Self, AllowListError> {
        let hosts = server.allowed_hosts.iter().map(|e| host_entry(e)).collect::<Result<Vec<_>, _>>()?;
        let origins = server.cors_origins.iter().map(|e| origin_entry(e)).collect::<Result<Vec<_>, _>>()?;
        let hosts = if has_tokens && hosts.is_empty() { None } else { Some(hosts) };
        Ok(Self { hosts, origins })
    }

    /// Loopback names only, no CORS: what a config with a broken list falls back to.
    pub fn loopback_only() -> Self {
        Self { hosts: Some(Vec::new()), origins: Vec::new() }
    }

    /// Whether every host is served (the token is the guard).
    pub fn any_host(&self) -> bool {
        self.hosts.is_none()
    }

    /// Whether a request naming `authority` is served.
    pub fn admits(&self, authority: &Authority) -> bool {
        authority.is_loopback() || self.hosts.as_ref().is_none_or(|hosts| hosts.contains(&authority.host))
    }

    /// Whether pages at `origin` may call the API.
    pub fn lists(&self, origin: &Origin) -> bool {
        self.origins.contains(origin)
    }

    /// Whether CORS is on (some origin is listed).
    pub fn cors(&self) -> bool {
        !self.origins.is_empty()
    }
}

/// An `allowed_hosts` entry: a bare host name or address, matching any port.
fn host_entry(entry: &str) -> Result<Host<String>, AllowListError> {
    let error = |problem: &str, hint: String| AllowListError {
        key: "allowed_hosts",
        entry: entry.to_owned(),
        problem: problem.to_owned(),
        hint,
    };
    if entry.contains('*') || entry.starts_with('.') {
        return Err(error("is a pattern", "list each name exactly, e.g. `redraft.lan`; there are no wildcards".into()));
    }
    let url =
        Url::parse(&format!("http://{entry}/")).map_err(|e| error(&format!("is not a host name ({e})"), example()))?;
    match (url.host_str(), url.host()) {
        (Some(name), Some(host)) if entry.eq_ignore_ascii_case(name) => Ok(host.to_owned()),
        (Some(name), _)
            if url.path() == "/"
                && url.username().is_empty()
                && url.password().is_none()
                && url.query().is_none()
                && url.fragment().is_none() =>
        {
            Err(error(
                "is not a bare host name as browsers write it",
                format!("write it as `{name}`; any port is allowed"),
            ))
        }
        _ => Err(error("is not a host name", example())),
    }
}

fn example() -> String {
    "write a bare host name or address, e.g. `redraft.lan` or `192.168.1.20`; any port is allowed".into()
}

/// A `cors_origins` entry: exactly `scheme://host[:port]`, `http` or `https`.
fn origin_entry(entry: &str) -> Result<Origin, AllowListError> {
    let error = |problem: &str, hint: String| AllowListError {
        key: "cors_origins",
        entry: entry.to_owned(),
        problem: problem.to_owned(),
        hint,
    };
    if entry == "*" || entry.eq_ignore_ascii_case("null") {
        return Err(error(
            "would admit pages anyone can make",
            "list the origins of your own pages exactly, e.g. `http://localhost:3000`".into(),
        ));
    }
    let example = || "write an origin as a browser sends it, e.g. `http://localhost:3000`".to_owned();
    let url = Url::parse(entry).map_err(|e| error(&format!("is not an origin ({e})"), example()))?;
    let origin = url.origin();
    if !matches!(&origin, Origin::Tuple(scheme, _, _) if scheme == "http" || scheme == "https") {
        return Err(error("is not an http(s) origin", example()));
    }
    let serialized = origin.ascii_serialization();
    if serialized != entry {
        return Err(error(
            "is not an origin as browsers send it (no path, no default port, lowercase)",
            format!("write it as `{serialized}`"),
        ));
    }
    Ok(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_round_trips_or_is_refused() {
        let loopback = |raw: &str| Authority::parse(raw).map(|a| a.is_loopback());
        assert_eq!(loopback("localhost:8080"), Some(true));
        assert_eq!(loopback("LOCALHOST"), Some(true));
        assert_eq!(loopback("127.0.0.2:1"), Some(true));
        assert_eq!(loopback("[::1]:8080"), Some(true));
        assert_eq!(loopback("localhost."), Some(false));
        assert_eq!(loopback("127.1"), None);
        assert_eq!(loopback("127.0.0.1@evil"), None);
        assert_eq!(loopback("evil#127.0.0.1"), None);
        assert_eq!(Authority::parse("localhost").map(|a| a.port), Some(80));
        assert_eq!(Authority::parse("localhost:80").map(|a| a.port), Some(80));
    }

    #[test]
    fn list_entries_name_exactly_what_they_admit() {
        assert!(host_entry("redraft.lan").is_ok());
        assert!(host_entry("[::1]").is_ok());
        for bad in ["*", ".lan", "redraft.lan:8080", "http://redraft.lan", "127.1", "a b", ""] {
            assert!(host_entry(bad).is_err(), "{bad}");
        }
        assert!(origin_entry("http://localhost:3000").is_ok());
        assert!(origin_entry("https://app.example").is_ok());
        for bad in
            ["*", "null", "localhost:3000", "http://localhost:3000/", "http://localhost:80", "file:///x", "ws://a"]
        {
            assert!(origin_entry(bad).is_err(), "{bad}");
        }
        let e = origin_entry("http://LOCALHOST:3000").unwrap_err().to_string();
        assert!(e.contains("hint: write it as `http://localhost:3000`"), "{e}");
    }
}
