//! `$ref`s to other schema files: read from the root schema file's directory, never over the
//! network. The validator asks `LocalFiles` for every resource the schema does not hold
//! itself (a relative `$ref` resolves against the URI of the file it is written in, so nested
//! references work relative to their own file); what it gets is confined to one directory:
//! the path is canonicalised (`..` and symbolic links resolved) and must stay under the
//! canonical directory of the root schema file.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use jsonschema::{Retrieve, Uri};
use serde_json::Value;

/// A `$ref` that is not followed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefError {
    /// An `http:` or `https:` reference (or one that resolves to such a URI through `$id`).
    #[error(
        "`{reference}` is not fetched: schemas are never read over the network\nhint: save the schema it names in a file next to this schema and refer to it by a relative path (`\"$ref\": \"address.json\"`), or copy it under `$defs`"
    )]
    Remote { reference: String },
    /// A reference to a file from a schema given inline, which has no directory.
    #[error(
        "`{reference}` names a file, and an inline schema has no directory to read it from: `$ref`s to other files need a schema file\nhint: save the schema to a file and give it as `schema:PATH`, or move the definition under `$defs` and refer to `#/$defs/NAME`"
    )]
    NeedsFile { reference: String },
    /// A file outside the root schema file's directory (`..`, an absolute path, a symbolic link
    /// leading out).
    #[error(
        "`{reference}` is outside the schema file's directory: a `$ref` may only name files in it or below it (symbolic links resolved)\nhint: copy the schema it names next to the schema file and refer to it by a relative path"
    )]
    Outside { reference: String },
    /// A reference of a scheme that names no file (`urn:`, `ftp:`, …).
    #[error(
        "`{reference}` is not a file: only relative references to schema files are followed\nhint: refer to a file next to the schema, e.g. `\"$ref\": \"address.json#/$defs/street\"`"
    )]
    Unsupported { reference: String },
    #[error("cannot read `{reference}`: {source}\nhint: check that the file exists next to the schema file")]
    Read {
        reference: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{reference}` is not valid JSON: {source}")]
    Parse {
        reference: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The files a schema's `$ref`s may read, and what was read.
#[derive(Debug, Default)]
pub(super) struct LocalFiles {
    /// The canonical directory of the root schema file; none for an inline schema.
    root: Option<PathBuf>,
    state: Mutex<Reads>,
}

#[derive(Debug, Default)]
struct Reads {
    /// Every file read, canonical, with its text: a cached schema is reused only while they
    /// are unchanged.
    files: Vec<(PathBuf, String)>,
    /// The first reference refused: the error the schema is reported with.
    refused: Option<RefError>,
}

impl LocalFiles {
    pub(super) fn new(root: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self { root, state: Mutex::default() })
    }

    /// The first refusal, if any reference was refused.
    pub(super) fn take_refusal(&self) -> Option<RefError> {
        self.lock().refused.take()
    }

    /// The files read, with their text.
    pub(super) fn take_files(&self) -> Vec<(PathBuf, String)> {
        std::mem::take(&mut self.lock().files)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reads> {
        // Nothing a panic elsewhere could leave half-done: a poisoned lock is usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self, uri: &str) -> Result<Value, RefError> {
        let scheme = uri.split_once(':').map(|(s, _)| s.to_ascii_lowercase()).unwrap_or_default();
        match scheme.as_str() {
            "http" | "https" => return Err(RefError::Remote { reference: uri.to_owned() }),
            // The base URI of a schema without a file: the reference was relative.
            "json-schema" => {
                let reference = uri.strip_prefix("json-schema:///").unwrap_or(uri).to_owned();
                return Err(RefError::NeedsFile { reference });
            }
            "file" => {}
            _ => return Err(RefError::Unsupported { reference: uri.to_owned() }),
        }
        let Some(root) = &self.root else { return Err(RefError::NeedsFile { reference: uri.to_owned() }) };
        let path = url::Url::parse(uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .ok_or_else(|| RefError::Unsupported { reference: uri.to_owned() })?;
        let reference = shown(&path, root);
        // The URI was resolved (its dot segments removed) before it got here; `..` still in the
        // path was percent-encoded. Either way a path naming a parent is refused as it is.
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(RefError::Outside { reference });
        }
        let canonical = match path.canonicalize() {
            Ok(canonical) => canonical,
            // Missing and outside: say it is outside, not whether it exists.
            Err(_) if !path.starts_with(root) => return Err(RefError::Outside { reference }),
            Err(source) => return Err(RefError::Read { reference, source }),
        };
        if !canonical.starts_with(root) {
            return Err(RefError::Outside { reference });
        }
        if !canonical.is_file() {
            let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
            return Err(RefError::Read { reference, source });
        }
        let text = std::fs::read_to_string(&canonical)
            .map_err(|source| RefError::Read { reference: reference.clone(), source })?;
        let value = serde_json::from_str(&text).map_err(|source| RefError::Parse { reference, source })?;
        self.lock().files.push((canonical, text));
        Ok(value)
    }
}

/// How a referenced file is named in messages: relative to the root schema's directory (as a
/// schema author writes it, `../x.json` for one outside), so that no server path is shown.
fn shown(path: &Path, root: &Path) -> String {
    let (mut to, mut from) = (path.components().peekable(), root.components().peekable());
    while let (Some(a), Some(b)) = (to.peek(), from.peek())
        && a == b
    {
        to.next();
        from.next();
    }
    let mut out = PathBuf::new();
    for _ in from {
        out.push("..");
    }
    out.extend(to);
    out.display().to_string()
}

/// The retriever the validator is given: [`LocalFiles`], shared with the compiler.
pub(super) struct Retriever(pub(super) Arc<LocalFiles>);

impl Retrieve for Retriever {
    fn retrieve(&self, uri: &Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        self.0.read(uri.as_str()).map_err(|refused| {
            let message = refused.to_string();
            let mut state = self.0.lock();
            state.refused.get_or_insert(refused);
            message.into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_shown_relative_to_the_schema_directory() {
        let root = Path::new("/srv/app/schemas");
        assert_eq!(shown(Path::new("/srv/app/schemas/address.json"), root), "address.json");
        assert_eq!(shown(Path::new("/srv/app/schemas/common/x.json"), root), "common/x.json");
        assert_eq!(shown(Path::new("/srv/app/secret.json"), root), "../secret.json");
        assert_eq!(shown(Path::new("/etc/passwd"), root), "../../../etc/passwd");
    }
}
