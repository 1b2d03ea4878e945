//! Loading the configuration in layers — the XDG file, then the project's (or the one named),
//! then `REDRAFT_*` variables — merged key by key, each layer checked on its own first so that
//! an error names the file or the variable at fault, and each value's origin kept.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Config;
use super::env::env_tables;
use crate::error::ConfigError;

/// Where a value in force came from (a value no layer sets is the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    /// A config file.
    File(PathBuf),
    /// A `REDRAFT_*` environment variable.
    Env(String),
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::File(path) => write!(f, "{}", path.display()),
            Layer::Env(name) => write!(f, "${name}"),
        }
    }
}

/// The configuration in force, and the layer each key a layer set came from (dotted keys as
/// TOML writes them: `policy.max_iterations`, `models."openai/gpt-4o".input_usd_per_mtok`; the
/// last layer to set a key wins).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub origins: BTreeMap<String, Layer>,
}

impl Config {
    /// Parse config text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: origin.to_owned(), message: e.to_string() })
    }

    /// Read one config file (no layering).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        super::credentials::register_urls_in(&text);
        let config = Self::parse(&text, path)?;
        config.register_credentials();
        Ok(config)
    }

    /// Load the configuration in layers, later ones overriding earlier ones key by key:
    /// `$XDG_CONFIG_HOME/redraft/redraft.toml` (or `~/.config/…`), then `explicit` (an error
    /// if missing) or `$REDRAFT_CONFIG` or `./redraft.toml`, then `REDRAFT_<KEY>` environment
    /// variables. Each layer is checked on its own first, so an error names its file (or its
    /// variable) and key.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        Ok(Self::load_layers(explicit)?.config)
    }

    /// Like [`Config::load`], also telling where each value that a layer set came from.
    pub fn load_layers(explicit: Option<&Path>) -> Result<Loaded, ConfigError> {
        let mut layers = Vec::new();
        for path in files(explicit) {
            let text =
                std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            super::credentials::register_urls_in(&text);
            let table: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| ConfigError::Parse { path: path.clone(), message: e.to_string() })?;
            Self::parse(&text, &path)?;
            layers.push((Layer::File(path), table));
        }
        for (name, table) in env_tables()? {
            layers.push((Layer::Env(name), table));
        }
        let mut merged = toml::Table::new();
        let mut origins = BTreeMap::new();
        for (layer, table) in layers {
            merge_from(&mut merged, table, &layer, "", &mut origins);
        }
        let mut config = Config::deserialize(toml::Value::Table(merged)).map_err(|e| {
            // Every layer passed alone: name the ones whose values met here.
            let mut named: Vec<String> = Vec::new();
            for layer in origins.values().map(ToString::to_string) {
                if !named.contains(&layer) {
                    named.push(layer);
                }
            }
            ConfigError::Parse { path: PathBuf::from(named.join(" + ")), message: e.to_string() }
        })?;
        // An OpenAI-compatible server named by the environment alone takes bare model names.
        if config.default_provider.is_none()
            && config.default_model.is_none()
            && std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty())
        {
            config.default_provider = Some("openai".into());
            origins.insert("default_provider".into(), Layer::Env("OPENAI_BASE_URL".into()));
        }
        // Credentials are secrets from the moment they are read: `config show`, every error
        // naming them and every command started for a request show `[redacted]`.
        config.register_credentials();
        Ok(Loaded { config, origins })
    }
}

impl Config {
    /// Every place [`Config::load`] reads a config file from, lowest layer first, whether or not a
    /// file is there now: the XDG file, then `explicit`, `$REDRAFT_CONFIG` or `./redraft.toml`.
    /// (`redraft until` protects those in its working directory: the next run would read them.)
    pub fn file_places(explicit: Option<&Path>) -> Vec<PathBuf> {
        let (project, _) = project_file(explicit);
        xdg_file().into_iter().chain([project]).collect()
    }
}

/// `$XDG_CONFIG_HOME/redraft/redraft.toml` (or `~/.config/…`).
fn xdg_file() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("redraft").join("redraft.toml"))
}

/// The project's config file: `explicit`, `$REDRAFT_CONFIG` or `./redraft.toml`, and whether it
/// was named (then it must exist).
fn project_file(explicit: Option<&Path>) -> (PathBuf, bool) {
    match (explicit, std::env::var_os("REDRAFT_CONFIG").filter(|p| !p.is_empty())) {
        (Some(path), _) => (path.to_owned(), true),
        (None, Some(path)) => (PathBuf::from(path), true),
        (None, None) => (PathBuf::from("redraft.toml"), false),
    }
}

/// The config files in force, lowest layer first.
fn files(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(path) = xdg_file().filter(|p| p.is_file()) {
        files.push(path);
    }
    let (project, named) = project_file(explicit);
    if named || project.is_file() {
        files.push(project);
    }
    files
}

/// Merge `over` into `base` — tables key by key, anything else replaced — noting `layer` as
/// the origin of every value it sets, by dotted key.
fn merge_from(
    base: &mut toml::Table,
    over: toml::Table,
    layer: &Layer,
    prefix: &str,
    origins: &mut BTreeMap<String, Layer>,
) {
    for (key, value) in over {
        let dotted = if prefix.is_empty() { toml_key(&key) } else { format!("{prefix}.{}", toml_key(&key)) };
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge_from(b, o, layer, &dotted, origins),
            (_, value) => {
                note(&value, layer, &dotted, origins);
                base.insert(key, value);
            }
        }
    }
}

/// `layer` set `value` at `dotted`: every leaf under it comes from there.
fn note(value: &toml::Value, layer: &Layer, dotted: &str, origins: &mut BTreeMap<String, Layer>) {
    origins.retain(|key, _| key != dotted && !key.starts_with(&format!("{dotted}.")));
    match value {
        toml::Value::Table(table) if !table.is_empty() => {
            for (key, inner) in table {
                note(inner, layer, &format!("{dotted}.{}", toml_key(key)), origins);
            }
        }
        _ => {
            origins.insert(dotted.to_owned(), layer.clone());
        }
    }
}

/// A key as TOML writes it in a dotted key: bare when it can be, else quoted.
fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_merge_key_by_key_and_keep_their_origins() {
        let (file, env) = (Layer::File("a.toml".into()), Layer::Env("REDRAFT_MAX_ITERATIONS".into()));
        let mut base = toml::Table::new();
        let mut origins = BTreeMap::new();
        let first = "judge_model = \"a/b\"\n[policy]\nmax_iterations = 5\npatience = 2\n".parse().unwrap();
        merge_from(&mut base, first, &file, "", &mut origins);
        merge_from(&mut base, "[policy]\nmax_iterations = 7\n".parse().unwrap(), &env, "", &mut origins);
        let c = Config::deserialize(toml::Value::Table(base)).unwrap();
        assert_eq!((c.policy.max_iterations, c.policy.patience, c.judge_model.as_deref()), (7, 2, Some("a/b")));
        assert_eq!(origins["policy.max_iterations"], env);
        assert_eq!(origins["policy.patience"], file);
        assert_eq!(origins["judge_model"], file);
        assert_eq!(env.to_string(), "$REDRAFT_MAX_ITERATIONS");
        let mut origins = BTreeMap::new();
        let priced = "[models.\"openai/gpt-4o\"]\ninput_usd_per_mtok = 1\n".parse().unwrap();
        merge_from(&mut toml::Table::new(), priced, &file, "", &mut origins);
        assert_eq!(origins.keys().collect::<Vec<_>>(), ["models.\"openai/gpt-4o\".input_usd_per_mtok"]);
    }
}
