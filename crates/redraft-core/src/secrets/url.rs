//! The parts of a URL that can carry a credential, registered as known secrets: one function
//! for every URL a config holds (a provider's `base_url`, the database URL, the OTLP endpoint).

use super::{percent_decoded, register, register_percent_encoded};

/// Schemes whose user name is an identity (the password, or `PGPASSWORD`, is the credential):
/// `postgres://postgres@db/…` must not turn every "postgres" in the output into `[redacted]`.
const DATABASE_SCHEMES: [&str; 5] = ["postgres", "postgresql", "mysql", "mariadb", "sqlite"];

/// Register every part of `url` that can carry a credential, as written and percent-decoded:
///
/// - the password, and the user name when there is no password (a token given as the user:
///   `https://TOKEN@host/v1`) — except for a database, whose user is an identity;
/// - the `Authorization: Basic` form an HTTP client sends for them (`base64(user:password)`);
/// - every query value (`?key=…`, `?api_key=…`, `?token=…`: a query on such a URL is where
///   gateways take keys);
/// - when the URL does not parse (a password with an unencoded `/`, `#` or `?`), or parses
///   with an `@` left past its authority, everything between `://` and the last `@`, and what
///   follows its first `:`.
///
/// Values under [`super::MIN_SECRET_BYTES`] are not registered, as everywhere. A text that is
/// not a URL (no `://`) registers nothing.
pub fn register_url(text: &str) {
    let text = text.trim();
    let Some((scheme, rest)) = text.split_once("://") else { return };
    let database = DATABASE_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme));
    let parsed = url::Url::parse(text).ok();
    let mut userinfo_found = false;
    if let Some(parsed) = &parsed {
        let (user, password) = (parsed.username(), parsed.password());
        userinfo_found = !user.is_empty() || password.is_some();
        register_userinfo(user, password, database);
    }
    // The raw text between `://` and the last `@`: what a parser could not place (or placed in
    // the path), read as `user:password`.
    if let Some((userinfo, _)) = rest.rsplit_once('@')
        && !userinfo_found
        && (parsed.is_none() || userinfo.contains(':'))
    {
        register_percent_encoded(userinfo);
        match userinfo.split_once(':') {
            Some((user, password)) => register_userinfo(user, Some(password), database),
            None => register_userinfo(userinfo, None, database),
        }
    }
    let query = match &parsed {
        Some(parsed) => parsed.query().unwrap_or_default().to_owned(),
        None => {
            rest.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or_default().to_owned()).unwrap_or_default()
        }
    };
    for pair in query.split('&') {
        let value = pair.split_once('=').map_or("", |(_, v)| v);
        register_percent_encoded(value);
        register(&percent_decoded(&value.replace('+', " ")));
    }
}

/// Register a URL's user and password (each as written and percent-decoded), and the Basic
/// authorization an HTTP client makes of them.
fn register_userinfo(user: &str, password: Option<&str>, database: bool) {
    if user.is_empty() && password.is_none() {
        return;
    }
    match password {
        Some(password) => register_percent_encoded(password),
        None if !database => register_percent_encoded(user),
        None => {}
    }
    let password = password.unwrap_or_default();
    for (user, password) in [(user.to_owned(), password.to_owned()), (percent_decoded(user), percent_decoded(password))]
    {
        register_basic(&format!("{user}:{password}"));
    }
}

/// Register the base64 of `credentials` (`user:password`), as `Authorization: Basic` carries
/// it: with its padding, and without (so that it is found either way).
fn register_basic(credentials: &str) {
    let encoded = base64(credentials.as_bytes());
    register(&encoded);
    register(encoded.trim_end_matches('='));
}

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk.first().copied(), chunk.get(1).copied(), chunk.get(2).copied()];
        let n =
            (u32::from(b[0].unwrap_or(0)) << 16) | (u32::from(b[1].unwrap_or(0)) << 8) | u32::from(b[2].unwrap_or(0));
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        let kept = chunk.len() + 1;
        for (i, sextet) in sextets.iter().enumerate() {
            if i < kept {
                out.push(char::from(ALPHABET.get(*sextet as usize).copied().unwrap_or(b'A')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::redact;
    use super::*;

    #[test]
    fn base64_is_the_standard_one() {
        for (text, encoded) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("user:pass", "dXNlcjpwYXNz")]
        {
            assert_eq!(base64(text.as_bytes()), encoded);
        }
    }

    #[test]
    fn every_credential_in_a_url_is_known() {
        // A token as the user, with no password; and the Basic form a client makes of it.
        register_url("http://tokuser-url-test-AAA@127.0.0.1:1/v1");
        assert_eq!(
            redact("cannot connect to `http://tokuser-url-test-AAA@127.0.0.1:1/v1`"),
            "cannot connect to `http://[redacted]@127.0.0.1:1/v1`"
        );
        let basic = base64(b"tokuser-url-test-AAA:");
        assert_eq!(redact(&format!("Authorization: Basic {basic}")), "Authorization: Basic [redacted]");
        // User and password: the password, and the Basic form; the user is an identity.
        register_url("https://alice:pass-url-test-BBB@gw.example/v1");
        let basic = base64(b"alice:pass-url-test-BBB");
        assert_eq!(redact(&format!("alice {basic} pass-url-test-BBB")), "alice [redacted] [redacted]");
        // Query values, as written and decoded.
        register_url("https://gw.example/v1?key=query-url-test-CCC&api_key=query%2Furl-test-DDD");
        assert_eq!(
            redact("query-url-test-CCC query/url-test-DDD query%2Furl-test-DDD"),
            "[redacted] [redacted] [redacted]"
        );
        // A password a URL parser cannot read.
        register_url("postgres://rd:pa/ss-url-test-EEE@db.internal:5432/redraft");
        assert_eq!(redact("postgres://rd:pa/ss-url-test-EEE@db.internal"), "postgres://[redacted]@db.internal");
        assert_eq!(redact("pa/ss-url-test-EEE"), "[redacted]");
        register_url("postgres://rd:pa#ss?url-test-FFF@db.internal/redraft");
        assert_eq!(redact("pa#ss?url-test-FFF"), "[redacted]");
        // A URL that parses with the rest of a password in its path.
        register_url("postgres://rd:5432/url-test-GGG@db.internal/redraft");
        assert_eq!(redact("5432/url-test-GGG"), "[redacted]");
    }

    #[test]
    fn a_database_user_is_an_identity() {
        register_url("postgres://postgres@db.internal/redraft");
        register_url("postgresql://postgres:@db.internal/redraft?sslmode=require");
        assert_eq!(redact("postgres://postgres@db.internal"), "postgres://postgres@db.internal");
    }
}
