//! Every credential a config names is a known secret ([`redraft_core::secrets`]) from the
//! moment the config is loaded, before any request: not when the provider or the sandbox that
//! uses it is first built, which may be never, or after a command started for a request has
//! already printed it.

use std::collections::BTreeSet;

use redraft_sandbox::PASSED_ENV;

use super::Config;

/// The API key variables read by the providers of the ecosystem when a config names none:
/// `openai/…` and `anthropic/…` work without a `[providers.NAME]` table.
const DEFAULT_KEY_VARIABLES: [&str; 2] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// The base URL variables the providers read when a config names none, and the OTLP endpoints
/// the trace exporter reads.
const URL_VARIABLES: [&str; 5] = [
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// The headers (`name=value,…`, values percent-encoded) the trace exporter sends.
const HEADER_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"];

impl Config {
    /// Make every credential this config names a known secret: the value of each provider's
    /// `api_key_env` and of the ecosystem's default key variables; the server's bearer tokens
    /// (`tokens_env`); every variable passed through to a command (a provider's `pass_env`, a
    /// sandbox's `env`: deny by default, whatever its name, except the always-passed `PATH`,
    /// `HOME`, `LANG`); every credential in a URL the config holds or the providers and the
    /// trace exporter read from the environment (the database URL, each `base_url`, the OTLP
    /// endpoint — see [`redraft_core::secrets::register_url`]); the OTLP exporter's headers.
    /// [`Config::load`] calls it; it is cheap to call again.
    pub fn register_credentials(&self) {
        let mut key_variables: BTreeSet<&str> = DEFAULT_KEY_VARIABLES.into_iter().collect();
        key_variables.extend(self.providers.values().filter_map(|p| p.api_key_env.as_deref()));
        for variable in key_variables {
            if let Some(key) = variable_value(variable) {
                redraft_core::secrets::register(&key);
            }
        }
        if let Some(tokens) = variable_value(&self.server.tokens_env) {
            tokens.split(',').for_each(|token| {
                redraft_core::secrets::register(token);
            });
        }
        let passed =
            self.providers.values().flat_map(|p| &p.pass_env).chain(self.sandboxes.values().flat_map(|s| &s.env));
        register_passed_variables(passed);
        let urls = self
            .database_url
            .iter()
            .chain(self.providers.values().filter_map(|p| p.base_url.as_ref()))
            .chain(self.telemetry.otlp_endpoint.iter())
            .cloned()
            .chain(URL_VARIABLES.iter().filter_map(|v| variable_value(v)));
        for url in urls {
            redraft_core::secrets::register_url(&url);
        }
        for headers in HEADER_VARIABLES.iter().filter_map(|v| variable_value(v)) {
            for (_, value) in headers.split(',').filter_map(|pair| pair.split_once('=')) {
                redraft_core::secrets::register_percent_encoded(value);
            }
        }
    }
}

/// Make the values of `variables`, passed through to a command, known secrets: the command may
/// be given them, never echo them into a result. Every variable but the always-passed `PATH`,
/// `HOME` and `LANG` counts, whatever its name (`GH_PAT`, `DSN`, `CREDS` say nothing of what
/// they hold); values under [`redraft_core::secrets::MIN_SECRET_BYTES`] are not registered.
pub(crate) fn register_passed_variables<'a>(variables: impl IntoIterator<Item = &'a String>) {
    for variable in variables {
        if PASSED_ENV.contains(&variable.as_str()) {
            continue;
        }
        if let Some(value) = variable_value(variable) {
            redraft_core::secrets::register(&value);
        }
    }
}

/// The value of the environment variable `name`, when set and not empty.
fn variable_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Make the credentials of every URL written in `text` (a config file, a variable's value)
/// known secrets before the text is parsed: an error that quotes the text where it fails to
/// parse (TOML's shows the offending line) must not show a password.
pub(crate) fn register_urls_in(text: &str) {
    let is_scheme = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-');
    let ends = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`');
    for (at, _) in text.match_indices("://") {
        let before = text.get(..at).unwrap_or_default();
        let start = before.len() - before.bytes().rev().take_while(|&b| is_scheme(b)).count();
        let after = text.get(at..).unwrap_or_default();
        let end = at + after.find(ends).unwrap_or(after.len());
        if let Some(url) = text.get(start..end) {
            redraft_core::secrets::register_url(url);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_found_in_text_that_does_not_parse() {
        register_urls_in(
            "database_url = \"postgres://rd:pa/ss-conf-test-AAA@db/redraft\nx = 'https://tok-conf-test-BBB@h/v1'",
        );
        assert_eq!(redraft_core::secrets::redact("pa/ss-conf-test-AAA tok-conf-test-BBB"), "[redacted] [redacted]");
    }
}

#[cfg(test)]
mod config_tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn every_url_the_config_holds_is_known_once_loaded() {
        let config = Config::parse(
            r#"
database_url = "postgres://rd:pa/ss-conf-test-CCC@db.internal/redraft"

[providers.gw]
type = "openai"
base_url = "http://tokuser-conf-test-DDD@127.0.0.1:1/v1?api_key=query-conf-test-EEE"

[providers.ant]
type = "anthropic"
base_url = "https://u:ant-conf-test-FFF@gw.example"

[telemetry]
otlp_endpoint = "http://otel:otlp-conf-test-GGG@127.0.0.1:4318"
"#,
            Path::new("t.toml"),
        )
        .unwrap();
        config.register_credentials();
        let text = "pa/ss-conf-test-CCC tokuser-conf-test-DDD query-conf-test-EEE ant-conf-test-FFF otlp-conf-test-GGG";
        assert_eq!(redraft_core::secrets::redact(text), "[redacted] [redacted] [redacted] [redacted] [redacted]");
    }
}
