//! `REDRAFT_<KEY>` environment variables: the layer above the config files. Each variable is
//! read as a table of its own and checked alone, so that a bad value is blamed on its variable.

use serde::Deserialize;

use super::Config;
use crate::error::ConfigError;

/// Keys that `REDRAFT_<KEY>` environment variables override, and where they live.
pub(super) const ENV_KEYS: &[(&str, &[&str])] = &[
    ("default_model", &["default_model"]),
    ("default_provider", &["default_provider"]),
    ("model", &["default_model"]),
    ("judge_model", &["judge_model"]),
    ("fallback_models", &["fallback_models"]),
    ("temperature_step", &["temperature_step"]),
    ("kinds_dir", &["kinds_dir"]),
    ("database_url", &["database_url"]),
    ("prompt_style", &["prompt_style"]),
    ("strategy", &["strategy"]),
    ("feedback_max_chars", &["feedback_max_chars"]),
    ("check_formats", &["check_formats"]),
    ("constrained", &["constrained"]),
    ("coerce", &["coerce"]),
    ("temperature", &["temperature"]),
    ("max_tokens", &["max_tokens"]),
    ("max_iterations", &["policy", "max_iterations"]),
    ("success_threshold", &["policy", "success_threshold"]),
    ("threshold", &["policy", "success_threshold"]),
    ("patience", &["policy", "patience"]),
    ("max_budget_usd", &["policy", "max_budget_usd"]),
    ("max_wall_time", &["policy", "max_wall_time"]),
    ("attempt_timeout", &["policy", "attempt_timeout"]),
    ("repeat_limit", &["policy", "repeat_limit"]),
    ("transport_retries", &["policy", "transport_retries"]),
    ("on_escalation", &["policy", "on_escalation"]),
    ("auto_retry_on_test_fail", &["decide", "auto_retry_on_test_fail"]),
    ("auto_retry_on_review_reject", &["decide", "auto_retry_on_review_reject"]),
    ("escalation_includes_diff", &["decide", "escalation_includes_diff"]),
    ("feedback_max_length", &["decide", "feedback_max_length"]),
    ("server_addr", &["server", "addr"]),
    ("max_body_bytes", &["server", "max_body_bytes"]),
    ("max_concurrent_runs", &["server", "max_concurrent_runs"]),
    ("grace_period", &["server", "grace_period"]),
    ("lease", &["queue", "lease"]),
    ("max_queued_runs", &["queue", "max_queued_runs"]),
    ("max_wait", &["queue", "max_wait"]),
];

/// `REDRAFT_*` variables that are not config keys (the config path; what agents are given; the
/// server's default tokens variable; the Python the tests use; the log format).
pub(super) const ENV_NOT_KEYS: &[&str] = &["config", "prompt_file", "iteration", "tokens", "python", "log_format"];

/// The `REDRAFT_<KEY>` environment variables, each as a config table of its own.
pub(super) fn env_tables() -> Result<Vec<(String, toml::Table)>, ConfigError> {
    let mut tables = Vec::new();
    for (name, value) in std::env::vars() {
        let Some(key) = name.strip_prefix("REDRAFT_").map(str::to_ascii_lowercase) else { continue };
        if value.is_empty() || ENV_NOT_KEYS.contains(&key.as_str()) {
            continue;
        }
        // An error below quotes the value.
        super::credentials::register_urls_in(&value);
        let Some((_, path)) = ENV_KEYS.iter().find(|(k, _)| *k == key) else {
            tracing::warn!(variable = %name, "ignoring an environment variable that names no config key");
            continue;
        };
        let parsed = if path.last() == Some(&"fallback_models") {
            toml::Value::Array(value.split(',').map(|m| toml::Value::String(m.trim().to_owned())).collect())
        } else {
            // A number or boolean when it reads as one, else a string.
            format!("v = {value}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .filter(|v| !v.is_table() && !v.is_array())
                .unwrap_or_else(|| toml::Value::String(value.clone()))
        };
        // The variable as a table of its own, checked alone so that a bad value is blamed on
        // its variable, not on a config file, then merged.
        let mut alone = parsed;
        for part in path.iter().rev() {
            alone = toml::Value::Table(toml::Table::from_iter([(part.to_string(), alone)]));
        }
        if let Err(e) = Config::deserialize(alone.clone()) {
            return Err(ConfigError::Invalid { key: name, message: format!("`{value}`: {e}") });
        }
        if let toml::Value::Table(alone) = alone {
            tables.push((name, alone));
        }
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_names_a_key_of_the_file() {
        for (variable, path) in ENV_KEYS {
            let mut value = toml::Value::String("x".into());
            for part in path.iter().rev() {
                value = toml::Value::Table(toml::Table::from_iter([(part.to_string(), value)]));
            }
            // A key the file has takes the value or refuses its type; one it lacks is unknown.
            if let Err(e) = Config::deserialize(value) {
                assert!(!e.to_string().contains("unknown field"), "REDRAFT_{}: {e}", variable.to_uppercase());
            }
        }
    }
}
