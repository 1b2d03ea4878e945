//! The typed values of a run request. Each is decided when the request is deserialized, by
//! its JSON type where it has two forms, so nothing downstream reads a request field as JSON
//! or parses a string from it again: a sandbox is a configured name or an inline object
//! ([`SandboxRequest`]), evaluator directives are [`Directive`]s ([`Directives`]), an artifact
//! extension is checked once ([`ArtifactExt`]).

use std::borrow::Cow;
use std::fmt;

use redraft_core::Directive;
use redraft_sandbox::Sandbox;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The sandbox a request asks for: by its JSON type, a string is the name of a
/// `[sandboxes.NAME]` in the config (only ever looked up, never read as a spec), an object an
/// inline spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxRequest {
    /// `"NAME"`: a `[sandboxes.NAME]` from the config.
    Named(String),
    /// `{"network": false, …}`: a spec given with the request.
    Inline(Sandbox),
}

impl Serialize for SandboxRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SandboxRequest::Named(name) => serializer.serialize_str(name),
            SandboxRequest::Inline(spec) => spec.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for SandboxRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SandboxVisitor;

        impl<'de> Visitor<'de> for SandboxVisitor {
            type Value = SandboxRequest;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"the name of a configured sandbox (a string) or an inline spec (an object such as {"network": false})"#)
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(SandboxRequest::Named(name.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Sandbox::deserialize(de::value::MapAccessDeserializer::new(map)).map(SandboxRequest::Inline)
            }
        }

        deserializer.deserialize_any(SandboxVisitor)
    }
}

impl JsonSchema for SandboxRequest {
    fn schema_name() -> Cow<'static, str> {
        "SandboxRequest".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A sandbox for `exec:` evaluators and command proposers: the name of a `[sandboxes.NAME]` in the config, or an inline spec (over the network an inline spec may only tighten limits: no `env`, no `workdir`).",
            "oneOf": [
                {"type": "string", "minLength": 1},
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "workdir": {"type": "string"},
                        "env": {"type": "array", "items": {"type": "string"}},
                        "cpu_seconds": {"type": "integer", "minimum": 0},
                        "memory_mb": {"type": "integer", "minimum": 0},
                        "open_files": {"type": "integer", "minimum": 0},
                        "file_size_mb": {"type": "integer", "minimum": 0},
                        "network": {"type": "boolean"},
                        "read_only_root": {"type": "boolean"}
                    }
                }
            ]
        })
    }
}

/// Evaluator directives, read from one string or a list of strings; each parsed into a
/// [`Directive`] as the request is read (an unknown one makes the request invalid).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives(pub Vec<Directive>);

impl Directives {
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The directives, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Directive> {
        self.0.iter()
    }
}

impl From<Vec<Directive>> for Directives {
    fn from(directives: Vec<Directive>) -> Self {
        Self(directives)
    }
}

impl Serialize for Directives {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Directives {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DirectivesVisitor;

        impl<'de> Visitor<'de> for DirectivesVisitor {
            type Value = Directives;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an evaluator directive such as \"schema:PATH\", or a list of them")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                text.parse::<Directive>().map(|d| Directives(vec![d])).map_err(E::custom)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Directives::default())
            }

            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Directives::default())
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(d) = seq.next_element::<Directive>()? {
                    out.push(d);
                }
                Ok(Directives(out))
            }
        }

        deserializer.deserialize_any(DirectivesVisitor)
    }
}

impl JsonSchema for Directives {
    fn schema_name() -> Cow<'static, str> {
        "Directives".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let directive = json_schema!({
            "type": "string",
            "pattern": "^(schema|kind|validate|exec|http|score|llm):\\s*\\S|^https?://"
        });
        json_schema!({
            "description": "Evaluator directive(s), all of which must pass: `schema:PATH`, `kind:NAME`, `exec:CMD` (only commands the server allows), `http:URL`, `score:CRITERION` (an LLM judge), `llm:NAME`.",
            "oneOf": [directive, {"type": "array", "items": directive}, {"type": "null"}]
        })
    }
}

/// A request's `context`: a JSON object, or nothing (`null` or left out).
pub(super) fn object<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, D::Error> {
    match Option::<serde_json::Value>::deserialize(deserializer)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Object(object)) => Ok(Some(object)),
        Some(other) => Err(de::Error::custom(format!(
            "must be a JSON object, not {}; wrap it, e.g. {{\"value\": …}}",
            match other {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                _ => "a boolean",
            }
        ))),
    }
}

/// The artifact file's extension for `exec:` evaluators: 1 to 16 ASCII letters, digits, `_`
/// or `-` (a leading `.` is dropped), checked as the request is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactExt(String);

impl ArtifactExt {
    /// The extension, without a dot.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ArtifactExt {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let ext = text.trim_start_matches('.');
        if ext.is_empty() || ext.len() > 16 || !ext.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!(
                "`{ext}` is not a file extension; use letters, digits, `_` or `-` (at most 16), e.g. `py`"
            ));
        }
        Ok(Self(ext.to_owned()))
    }
}

impl From<ArtifactExt> for String {
    fn from(ext: ArtifactExt) -> Self {
        ext.0
    }
}

impl JsonSchema for ArtifactExt {
    fn schema_name() -> Cow<'static, str> {
        "ArtifactExt".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The artifact file's extension for `exec:` evaluators (`py`, `rs`, …).",
            "type": "string",
            "pattern": "^\\.?[A-Za-z0-9_-]{1,16}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_sandbox_is_a_name_or_an_object_by_its_json_type() {
        let read = |v: serde_json::Value| serde_json::from_value::<SandboxRequest>(v);
        assert_eq!(read(json!("strict")).unwrap(), SandboxRequest::Named("strict".into()));
        // A string is a name, whatever it holds: never read as a spec.
        let text = r#"{"env": ["OPENAI_API_KEY"], "workdir": "/etc"}"#;
        assert_eq!(read(json!(text)).unwrap(), SandboxRequest::Named(text.into()));
        let inline = read(json!({"network": false, "cpu_seconds": 5})).unwrap();
        assert_eq!(
            inline,
            SandboxRequest::Inline(Sandbox { network: false, cpu_seconds: Some(5), ..Sandbox::default() })
        );
        for bad in [json!(1), json!(true), json!(["a"]), json!(null), json!({"netwrk": false})] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
        // Written as read.
        for v in [json!("strict"), json!({"network": false})] {
            let back = serde_json::to_value(read(v.clone()).unwrap()).unwrap();
            assert_eq!(read(back).unwrap(), read(v).unwrap());
        }
    }

    #[test]
    fn directives_are_parsed_as_they_are_read() {
        let read = |v: serde_json::Value| serde_json::from_value::<Directives>(v);
        assert_eq!(read(json!("kind:fill")).unwrap().0, [Directive::Kind("fill".into())]);
        assert_eq!(read(json!(["exec:true", "schema:p.json"])).unwrap().0.len(), 2);
        let err = read(json!(["exec:true", "sql:select 1"])).unwrap_err().to_string();
        assert!(err.contains("sql:select 1") && err.contains("hint:"), "{err}");
        assert!(read(json!({"exec": "true"})).is_err());
        assert!(read(json!(null)).unwrap().is_empty());
        let d = read(json!(["http://h:1/v", "score:polite"])).unwrap();
        assert_eq!(read(serde_json::to_value(&d).unwrap()).unwrap(), d);
    }

    #[test]
    fn artifact_extensions_are_checked_as_they_are_read() {
        let read = |v: &str| serde_json::from_value::<ArtifactExt>(json!(v));
        assert_eq!(read(".py").unwrap().as_str(), "py");
        for bad in ["", ".", "py/../x", "a b", "x".repeat(17).as_str(), "p\u{0}y"] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
    }
}
