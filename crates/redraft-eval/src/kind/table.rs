//! Reference tables: CSV with a header row, JSON Lines of objects, or Parquet (with the
//! `parquet` cargo feature), loaded once into a CEL map from key to row.
//!
//! CSV cells stay strings (CSV has no types: `007` stays `"007"`); convert in CEL with
//! `int(row.rate)` or `double(row.rate)`. JSON Lines and Parquet rows keep their types.

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
        #[cfg(feature = "parquet")]
        Some("parquet") => load_parquet(name, path, key)?,
        #[cfg(not(feature = "parquet"))]
        Some("parquet") => {
            return Err(err(
                path,
                None,
                name,
                "Parquet tables need redraft built with the `parquet` feature".into(),
                Some(
                    "rebuild with `--features parquet`, or convert the file to CSV (with a header row) or JSON Lines"
                        .into(),
                ),
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
    let mut keyed = Keyed::new(name, path, key);
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
            err(
                path,
                Some(i + 1),
                name,
                format!("not valid JSON: {e}"),
                Some("a JSON Lines table holds one JSON object per line".into()),
            )
        })?;
        keyed.insert(i + 1, value)?;
    }
    Ok(keyed.finish())
}

/// Parquet rows, read as JSON objects (the line of an error is the row number, from 1).
#[cfg(feature = "parquet")]
fn load_parquet(name: &str, path: &Path, key: &str) -> Result<Rows, KindError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(path).map_err(|e| read_error(path, e))?;
    let bad =
        |e: parquet::errors::ParquetError| err(path, None, name, format!("not a readable Parquet file: {e}"), None);
    let reader = SerializedFileReader::new(file).map_err(bad)?;
    let mut keyed = Keyed::new(name, path, key);
    for (i, row) in reader.get_row_iter(None).map_err(bad)?.enumerate() {
        keyed.insert(i + 1, row.map_err(bad)?.to_json_value())?;
    }
    Ok(keyed.finish())
}

/// Rows of typed objects (JSON Lines, Parquet) gathered by key, rejecting a missing or
/// repeated key with the line (or row) it is on.
struct Keyed<'a> {
    name: &'a str,
    path: &'a Path,
    key: &'a str,
    by_key: HashMap<Key, Value>,
    lines: HashMap<String, usize>,
}

impl<'a> Keyed<'a> {
    fn new(name: &'a str, path: &'a Path, key: &'a str) -> Self {
        Self { name, path, key, by_key: HashMap::new(), lines: HashMap::new() }
    }

    fn insert(&mut self, line: usize, value: serde_json::Value) -> Result<(), KindError> {
        let (name, path, key) = (self.name, self.path, self.key);
        let serde_json::Value::Object(fields) = &value else {
            return Err(err(path, Some(line), name, "the row is not a JSON object".into(), None));
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
        if let Some(first) = self.lines.insert(seen.clone(), line) {
            return Err(err(
                path,
                Some(line),
                name,
                format!("the key {seen} is used twice (first on line {first})"),
                Some(format!("keys in the `{key}` field must be unique")),
            ));
        }
        self.by_key.insert(id, json_to_cel(&value));
        Ok(())
    }

    fn finish(self) -> Rows {
        (self.by_key.len(), self.by_key)
    }
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
        assert_eq!(err, "DIR/o.jsonl:1: table `t`: the row is not a JSON object");
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
        if cfg!(feature = "parquet") {
            assert!(err.starts_with("DIR/w.parquet: table `t`: not a readable Parquet file"), "{err}");
        } else {
            assert!(
                err.starts_with(
                    "DIR/w.parquet: table `t`: Parquet tables need redraft built with the `parquet` feature"
                ),
                "{err}"
            );
        }
        let err = check("w.xlsx", "", "id").unwrap_err();
        assert!(err.starts_with("DIR/w.xlsx: table `t`: a `.xlsx` file is not a table format"), "{err}");
        let err = load("t", Path::new("/nonexistent/w.csv"), "id").unwrap_err().to_string();
        assert!(err.starts_with("cannot read `/nonexistent/w.csv`:") && err.contains("hint:"), "{err}");
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn parquet_rows_keep_their_types() {
        use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("workers.parquet");
        let schema = Arc::new(
            parse_message_type(
                "message w { REQUIRED BYTE_ARRAY id (UTF8); REQUIRED BYTE_ARRAY city (UTF8); REQUIRED INT64 years; }",
            )
            .unwrap(),
        );
        let file = std::fs::File::create(&path).unwrap();
        let mut writer =
            SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build())).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let strings = |v: &[&str]| v.iter().map(|s| ByteArray::from(*s)).collect::<Vec<_>>();
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<ByteArrayType>().write_batch(&strings(&["W-1", "W-2"]), None, None).unwrap();
        col.close().unwrap();
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<ByteArrayType>().write_batch(&strings(&["Louisville", "Toledo"]), None, None).unwrap();
        col.close().unwrap();
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<Int64Type>().write_batch(&[7, 3], None, None).unwrap();
        col.close().unwrap();
        group.close().unwrap();
        writer.close().unwrap();

        let table = load("workers", &path, "id").unwrap();
        assert_eq!(table.rows, 2);
        let Value::Map(map) = &table.value else { panic!("{:?}", table.value) };
        let Some(Value::Map(row)) = map.map.get(&Key::String(Arc::new("W-2".into()))) else { panic!() };
        assert_eq!(row.map.get(&Key::String(Arc::new("city".into()))), Some(&Value::String(Arc::new("Toledo".into()))));
        assert_eq!(row.map.get(&Key::String(Arc::new("years".into()))), Some(&Value::Int(3)));
    }
}
