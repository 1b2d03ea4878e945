//! `http_allow`: which `http:` validator URLs a request from the network may reach.
//!
//! Requested URLs and entries are both parsed and normalised (WHATWG URL rules: scheme and
//! host lowercased, default ports dropped, `.` and `..` segments — also percent-encoded ones —
//! resolved, numeric IPv4 forms such as `2130706433` read as addresses) before they are
//! compared as structures:
//!
//! - scheme, host and port must be equal;
//! - an entry whose path ends in `/*` admits any path below that directory, with any query;
//!   any other entry admits exactly its path and query;
//! - a URL with credentials (`user@host`), or whose path holds an encoded `/`, `\` or `.`, is
//!   refused; a fragment is dropped (it is never sent).

pub use ::url::Url;

/// One `http_allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    text: String,
    url: Url,
    /// Whether the entry ended in `/*`: `url`'s path is then a directory prefix.
    below: bool,
}

/// The parsed `http_allow` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlAllowList {
    rules: Vec<Rule>,
}

/// Why an `http_allow` entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the `http_allow` entry `{entry}` {problem}\nhint: {hint}")]
pub struct BadEntry {
    pub entry: String,
    pub problem: String,
    pub hint: String,
}

/// Why a URL is refused or unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlRefusal {
    /// It does not parse as an `http://` or `https://` URL.
    Invalid(String),
    /// It carries a user name or password.
    Credentials,
    /// Its path holds a percent-encoded `/`, `\` or `.`, which servers may decode differently.
    EncodedSeparator,
    /// No entry admits it.
    NoMatch,
}

impl std::fmt::Display for UrlRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlRefusal::Invalid(why) => write!(f, "is not a usable http:// or https:// URL ({why})"),
            UrlRefusal::Credentials => f.write_str("carries credentials (`user@host`)"),
            UrlRefusal::EncodedSeparator => f.write_str("has a percent-encoded `/`, `\\` or `.` in its path"),
            UrlRefusal::NoMatch => f.write_str("matches no `http_allow` entry"),
        }
    }
}

/// Parse and normalise a validator URL: `http://` or `https://`, a host, no credentials, no
/// encoded separators; the fragment is dropped.
pub fn normalise(text: &str) -> Result<Url, UrlRefusal> {
    let mut url = Url::parse(text.trim()).map_err(|e| UrlRefusal::Invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlRefusal::Invalid(format!("the scheme is `{}`", url.scheme())));
    }
    if url.host().is_none() {
        return Err(UrlRefusal::Invalid("it names no host".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlRefusal::Credentials);
    }
    let path = url.path().to_ascii_lowercase();
    if ["%2f", "%5c", "%2e"].iter().any(|encoded| path.contains(encoded)) {
        return Err(UrlRefusal::EncodedSeparator);
    }
    url.set_fragment(None);
    Ok(url)
}

impl UrlAllowList {
    /// Parse every entry; a malformed one is an error naming it.
    pub fn parse(entries: &[String]) -> Result<Self, BadEntry> {
        let rules = entries.iter().map(|e| Rule::parse(e)).collect::<Result<_, _>>()?;
        Ok(Self { rules })
    }

    /// The normalised URL to call for `requested`, or why it is refused.
    pub fn admit(&self, requested: &str) -> Result<Url, UrlRefusal> {
        let url = normalise(requested)?;
        if self.rules.iter().any(|r| r.admits(&url)) { Ok(url) } else { Err(UrlRefusal::NoMatch) }
    }
}

impl Rule {
    fn parse(entry: &str) -> Result<Self, BadEntry> {
        let bad = |problem: String, hint: &str| BadEntry { entry: entry.to_owned(), problem, hint: hint.to_owned() };
        let (text, below) = match entry.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => (prefix, true),
            Some(_) => {
                return Err(bad(
                    "has a `*` that does not follow a `/`".into(),
                    "write a directory followed by `/*` (e.g. `http://validator.internal/api/*`), or the exact URL",
                ));
            }
            None => (entry, false),
        };
        let url = normalise(text)
            .map_err(|why| bad(why.to_string(), "write a full URL such as `http://127.0.0.1:8000/validate`"))?;
        if text.contains('#') {
            return Err(bad("has a fragment".into(), "remove the `#…` part; fragments are never sent"));
        }
        if below && url.query().is_some() {
            return Err(bad("has a query before `/*`".into(), "end the entry with the directory and `/*`"));
        }
        Ok(Self { text: entry.to_owned(), url, below })
    }

    fn admits(&self, url: &Url) -> bool {
        let same_origin = self.url.scheme() == url.scheme()
            && self.url.host() == url.host()
            && self.url.port_or_known_default() == url.port_or_known_default();
        if !same_origin {
            return false;
        }
        if self.below {
            url.path().starts_with(self.url.path())
        } else {
            self.url.path() == url.path() && self.url.query() == url.query()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> UrlAllowList {
        UrlAllowList::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn urls_are_normalised_before_matching() {
        let l = list(&["http://validator.internal:8000/validate", "https://checks.example/api/*"]);
        let ok = |u: &str| l.admit(u).map(|u| u.to_string());
        assert_eq!(ok("http://validator.internal:8000/validate"), Ok("http://validator.internal:8000/validate".into()));
        assert_eq!(
            ok("HTTP://Validator.Internal:8000/validate#x"),
            Ok("http://validator.internal:8000/validate".into())
        );
        assert_eq!(
            ok("https://checks.example:443/api/v1/fill?x=1"),
            Ok("https://checks.example/api/v1/fill?x=1".into())
        );
        assert_eq!(ok("https://checks.example/api/v1/../v2"), Ok("https://checks.example/api/v2".into()));
        for (refused, why) in [
            ("http://validator.internal:8000/validate/../x", UrlRefusal::NoMatch),
            ("http://validator.internal:8000/validate/%2e%2e/x", UrlRefusal::NoMatch),
            ("http://validator.internal:8000/validate?debug=1", UrlRefusal::NoMatch),
            ("http://validator.internal:8001/validate", UrlRefusal::NoMatch),
            ("https://validator.internal:8000/validate", UrlRefusal::NoMatch),
            ("http://validator.internal.evil:8000/validate", UrlRefusal::NoMatch),
            ("http://validator.internal:8000@evil/validate", UrlRefusal::Credentials),
            ("https://checks.example/api/../admin", UrlRefusal::NoMatch),
            ("https://checks.example/api", UrlRefusal::NoMatch),
            ("https://checks.example/apix/y", UrlRefusal::NoMatch),
            ("https://checks.example/api/%2F..%2Fadmin", UrlRefusal::EncodedSeparator),
            ("https://checks.example/api/..%5cadmin", UrlRefusal::EncodedSeparator),
        ] {
            assert_eq!(l.admit(refused), Err(why), "{refused}");
        }
        assert!(matches!(l.admit("file:///etc/passwd"), Err(UrlRefusal::Invalid(_))));
        assert!(matches!(l.admit("not a url"), Err(UrlRefusal::Invalid(_))));
    }

    #[test]
    fn numeric_hosts_are_addresses() {
        let l = list(&["http://127.0.0.1:9000/*"]);
        assert!(l.admit("http://2130706433:9000/x").is_ok());
        assert!(l.admit("http://0x7f.1:9000/x").is_ok());
        assert_eq!(l.admit("http://127.0.0.2:9000/x"), Err(UrlRefusal::NoMatch));
        assert_eq!(l.admit("http://localhost:9000/x"), Err(UrlRefusal::NoMatch));
    }

    #[test]
    fn bad_entries_are_named() {
        let err = |e: &str| UrlAllowList::parse(&[e.to_owned()]).unwrap_err().to_string();
        assert!(err("http://validator.internal/check*").contains("does not follow a `/`"));
        assert!(err("validator.internal/*").contains("full URL"));
        assert!(err("http://a/x#frag").contains("fragment"));
        assert!(err("http://u:p@a/x").contains("credentials"));
    }
}
