//! Reference tables: CSV with a header row, or JSON Lines of objects, loaded once into a CEL
//! map from key to row.
//!
//! CSV cells stay strings (CSV has no types: `007` stays `"007"`); convert in CEL with
//! `int(row.rate)` or `double(row.rate)`. JSON Lines rows keep their JSON types.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cel::Value;
use cel::objects::{Key, Map};

use super::KindError;
use super::expr::json_to_cel;

/// A loaded table.
#[derive(Debug)]
pub(super) struct Table {
    pub name: String,
    pub rows: usize,
    /// key → row, as a CEL map.
    pub value: Value,
}

fn err(path: &Path, line: Option<usize>, table: &str, message: String, hint: Option<String>) -> KindError {
    KindError::Table { path: path.to_owned(), line, table: table.to_owned(), message, hint }
}

/// Load the table `name` from `path`, keyed by the column `key`.
pub(super) fn load(name: &str, path: &Path, key: &str) -> Result<Table, KindError> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let (rows, by_key) = match ext.as_deref() {
        Some("csv") => load_csv(name, path, key)?,
        Some("jsonl" | "ndjson") => load_jsonl(name, path, key)?,
        Some("parquet") => {
            return Err(err(
                path,
                None,
                name,
                "Parquet tables are not supported yet".into(),
                Some("convert the file to CSV (with a header row) or JSON Lines (one object per line)".into()),
            ));
        }
        other => {
            let what = other.map_or_else(|| "a file without an extension".to_owned(), |e| format!("a `.{e}` file"));
            return Err(err(
                path,
                None,
                name,
                format!("{what} is not a table format"),
                Some("use `.csv` (with a header row) or `.jsonl` (one JSON object per line)".into()),
            ));
        }
    };
    Ok(Table { name: name.to_owned(), rows, value: Value::Map(Map { map: Arc::new(by_key) }) })
}

fn read_error(path: &Path, source: std::io::Error) -> KindError {
    KindError::Read {
        path: path.to_owned(),
        source,
        hint: Some("`file` in `[tables.NAME]` is relative to the kind's directory"),
    }
}

type Rows = (usize, HashMap<Key, Value>);

fn load_csv(name: &str, path: &Path, key: &str) -> Result<Rows, KindError> {
    let file = std::fs::File::open(path).map_err(|e| read_error(path, e))?;
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(file);
    let csv_err = |e: csv::Error| {
        let line = e.position().map(|p| p.line() as usize);
        let message = match e.kind() {
            csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                format!("the row has {len} cells where the header has {expected_len}")
            }
            _ => e.to_string(),
        };
        err(path, line, name, message, None)
    };
    let header: Vec<String> = reader.headers().map_err(csv_err)?.iter().map(str::to_owned).collect();
    if header.iter().all(String::is_empty) {
        return Err(err(path, Some(1), name, "the file is empty or has no header row".into(), None));
    }
    for (i, h) in header.iter().enumerate() {
        if h.is_empty() {
            return Err(err(path, Some(1), name, format!("column {} of the header has no name", i + 1), None));
        }
        if header[..i].contains(h) {
            return Err(err(path, Some(1), name, format!("the header names the column `{h}` twice"), None));
        }
    }
    let Some(key_index) = header.iter().position(|h| h == key) else {
        return Err(err(
            path,
            Some(1),
            name,
            format!("the header has no key column `{key}` (columns: {})", header.join(", ")),
            Some(format!("set `key` in `[tables.{name}]` of kind.toml to one of the columns")),
        ));
    };
    let columns: Vec<Key> = header.iter().map(|h| Key::String(Arc::new(h.clone()))).collect();
    let mut by_key = HashMap::new();
    let mut lines: HashMap<String, usize> = HashMap::new();
    let mut rows = 0;
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let id = record.get(key_index).unwrap_or_default().to_owned();
        if id.is_empty() {
            return Err(err(path, Some(line), name, format!("the row has an empty key `{key}`"), None));
        }
        if let Some(first) = lines.insert(id.clone(), line) {
            return Err(err(
                path,
                Some(line),
                name,
                format!("the key `{id}` is used twice (first on line {first})"),
                Some(format!("keys in the `{key}` column must be unique")),
            ));
        }
        let row: HashMap<Key, Value> =
            columns.iter().cloned().zip(record.iter().map(|cell| Value::String(Arc::new(cell.to_owned())))).collect();
        by_key.insert(Key::String(Arc::new(id)), Value::Map(Map { map: Arc::new(row) }));
        rows += 1;
    }
    Ok((rows, by_key))
}

fn load_jsonl(name: &str, path: &Path, key: &str) -> Result<Rows, KindError> {
    let text = std::fs::read_to_string(path).map_err(|e| read_error(path, e))?;
    let mut by_key = HashMap::new();
    let mut lines: HashMap<String, usize> = HashMap::new();
    let mut rows = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
            err(
                path,
                Some(line),
                name,
                format!("not valid JSON: {e}"),
                Some("a JSON Lines table holds one JSON object per line".into()),
            )
        })?;
        let serde_json::Value::Object(fields) = &value else {
            return Err(err(path, Some(line), name, "the line is not a JSON object".into(), None));
        };
        let id = match fields.get(key) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Key::String(Arc::new(s.clone())),
            Some(serde_json::Value::Number(n)) if n.is_i64() => Key::Int(n.as_i64().unwrap_or_default()),
            Some(other) => {
                return Err(err(
                    path,
                    Some(line),
                    name,
                    format!("the key `{key}` is {other}; a key must be a non-empty string or an integer"),
                    None,
                ));
            }
            None => {
                return Err(err(
                    path,
                    Some(line),
                    name,
                    format!("the object has no key field `{key}`"),
                    Some(format!("every row needs `{key}`, or set `key` in `[tables.{name}]` of kind.toml")),
                ));
            }
        };
        let seen = fields.get(key).map(ToString::to_string).unwrap_or_default();
        if let Some(first) = lines.insert(seen.clone(), line) {
            return Err(err(
                path,
                Some(line),
                name,
                format!("the key {seen} is used twice (first on line {first})"),
                Some(format!("keys in the `{key}` field must be unique")),
            ));
        }
        by_key.insert(id, json_to_cel(&value));
        rows += 1;
    }
    Ok((rows, by_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Load `content` as the table `t` from a file called `file_name`, keyed by `key`; the
    /// error as its message.
    fn check(file_name: &str, content: &str, key: &str) -> Result<Table, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name);
        std::fs::write(&path, content).unwrap();
        load("t", &path, key).map_err(|e| e.to_string().replace(&dir.path().display().to_string(), "DIR"))
    }

    fn row(table: &Table, key: Key) -> &HashMap<Key, Value> {
        let Value::Map(map) = &table.value else { panic!("not a map") };
        let Some(Value::Map(row)) = map.map.get(&key) else { panic!("no row {key:?}") };
        &row.map
    }

    fn s(text: &str) -> Key {
        Key::String(Arc::new(text.to_owned()))
    }

    #[test]
    fn csv_rows_are_keyed_maps_of_strings() {
        let t = check("w.csv", "id, name ,age\nW-1,Ada, 36\n\"W-2\",\"Carter, Ben\",41\n", "id").unwrap();
        assert_eq!(t.rows, 2);
        let ada = row(&t, s("W-1"));
        assert_eq!(ada.get(&s("name")), Some(&Value::String(Arc::new("Ada".into()))));
        // cells stay strings, trimmed
        assert_eq!(ada.get(&s("age")), Some(&Value::String(Arc::new("36".into()))));
        assert_eq!(row(&t, s("W-2")).get(&s("name")), Some(&Value::String(Arc::new("Carter, Ben".into()))));
        // a spreadsheet's byte-order mark is not part of the first column's name
        assert_eq!(check("w.csv", "\u{feff}id,name\nW-1,Ada\n", "id").unwrap().rows, 1);
    }

    #[test]
    fn jsonl_rows_keep_their_types_and_may_have_integer_keys() {
        let t = check("o.jsonl", "{\"id\": 7, \"rate\": 21.5, \"tags\": [\"a\"]}\n\n{\"id\": 8}\n", "id").unwrap();
        assert_eq!(t.rows, 2);
        assert_eq!(row(&t, Key::Int(7)).get(&s("rate")), Some(&Value::Float(21.5)));
        assert!(check("o.ndjson", "{\"id\": \"a\"}\n", "id").is_ok());
    }

    #[test]
    fn bad_csv_files_are_named_with_their_line() {
        let err = check("w.csv", "id,name\nW-1,Ada\n", "key").unwrap_err();
        assert_eq!(
            err,
            "DIR/w.csv:1: table `t`: the header has no key column `key` (columns: id, name)\nhint: set `key` in `[tables.t]` of kind.toml to one of the columns"
        );
        let err = check("w.csv", "id,name\nW-1,Ada\nW-2,Ben\nW-1,Carla\n", "id").unwrap_err();
        assert!(err.starts_with("DIR/w.csv:4: table `t`: the key `W-1` is used twice (first on line 2)"), "{err}");
        let err = check("w.csv", "id,name\nW-1,Ada\nW-2\n", "id").unwrap_err();
        assert_eq!(err, "DIR/w.csv:3: table `t`: the row has 1 cells where the header has 2");
        let err = check("w.csv", "id,name\n,Ada\n", "id").unwrap_err();
        assert_eq!(err, "DIR/w.csv:2: table `t`: the row has an empty key `id`");
        let err = check("w.csv", "id,id\n", "id").unwrap_err();
        assert_eq!(err, "DIR/w.csv:1: table `t`: the header names the column `id` twice");
        assert!(check("w.csv", "", "id").unwrap_err().contains("no header row"));
    }

    #[test]
    fn bad_jsonl_files_are_named_with_their_line() {
        let err = check("o.jsonl", "{\"id\": 1}\n{\"id\": \n", "id").unwrap_err();
        assert!(err.starts_with("DIR/o.jsonl:2: table `t`: not valid JSON:"), "{err}");
        let err = check("o.jsonl", "[1]\n", "id").unwrap_err();
        assert_eq!(err, "DIR/o.jsonl:1: table `t`: the line is not a JSON object");
        let err = check("o.jsonl", "{\"id\": 1}\n{\"name\": 2}\n", "id").unwrap_err();
        assert!(err.starts_with("DIR/o.jsonl:2: table `t`: the object has no key field `id`\nhint:"), "{err}");
        let err = check("o.jsonl", "{\"id\": null}\n", "id").unwrap_err();
        assert!(err.contains("the key `id` is null; a key must be a non-empty string or an integer"), "{err}");
        let err = check("o.jsonl", "{\"id\": 1}\n{\"id\": 1}\n", "id").unwrap_err();
        assert!(err.starts_with("DIR/o.jsonl:2: table `t`: the key 1 is used twice (first on line 1)"), "{err}");
    }

    #[test]
    fn other_formats_are_refused_naming_the_file() {
        let err = check("w.parquet", "PAR1", "id").unwrap_err();
        assert_eq!(
            err,
            "DIR/w.parquet: table `t`: Parquet tables are not supported yet\nhint: convert the file to CSV (with a header row) or JSON Lines (one object per line)"
        );
        let err = check("w.xlsx", "", "id").unwrap_err();
        assert!(err.starts_with("DIR/w.xlsx: table `t`: a `.xlsx` file is not a table format"), "{err}");
        let err = load("t", Path::new("/nonexistent/w.csv"), "id").unwrap_err().to_string();
        assert!(err.starts_with("cannot read `/nonexistent/w.csv`:") && err.contains("hint:"), "{err}");
    }
}
