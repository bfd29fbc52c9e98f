//! How results are printed: aligned columns for people, JSON or YAML for
//! scripts.
//!
//! JSON is always compact, one document per command and line (JSON lines
//! for `dump`), so `ls pools -o json` prints exactly the bytes of the
//! `pools` array the registry serves. YAML is the same data through
//! serde_norway.

use clap::ValueEnum;
use mcs_store::dynamo::raw::AttributeValue;
use serde::Serialize;
use std::io::Write;

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns, kept narrow.
    Table,
    /// Aligned columns with the long ones too (`ls --all`: each record's
    /// version); elsewhere the same as `table`.
    Wide,
    /// Compact JSON, one document.
    Json,
    /// YAML.
    Yaml,
}

/// `value` as compact JSON plus a newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string(value)?;
    text.push('\n');
    Ok(text)
}

/// `value` as YAML.
pub fn yaml<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    Ok(serde_norway::to_string(value)?)
}

/// `value` in a structured format; `None` for [`Format::Table`] and
/// [`Format::Wide`], which each command renders itself.
pub fn structured<T: Serialize + ?Sized>(
    format: Format,
    value: &T,
) -> anyhow::Result<Option<String>> {
    match format {
        Format::Table | Format::Wide => Ok(None),
        Format::Json => json(value).map(Some),
        Format::Yaml => yaml(value).map(Some),
    }
}

/// Writes `text` to stdout. A closed pipe (`mcs-admin ls pools | head`) is
/// not an error: the reader has seen what it wanted.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Rows under a header, each column as wide as its widest cell, separated
/// by two spaces; no trailing blanks.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Self { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    /// Adds a row; missing cells are blank, extra ones ignored.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// How many rows were added.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The header and rows, aligned, each line ending in a newline.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            let mut rendered = String::new();
            for (i, (cell, width)) in line.iter().zip(&widths).enumerate() {
                if i > 0 {
                    rendered.push_str("  ");
                }
                rendered.push_str(cell);
                let pad = width.saturating_sub(cell.chars().count());
                rendered.extend(std::iter::repeat_n(' ', pad));
            }
            text.push_str(rendered.trim_end());
            text.push('\n');
        }
        text
    }
}

/// `n` and the noun, singular or plural: `1 key`, `3 keys`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Label/value lines, labels aligned.
pub fn fields<'a>(pairs: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let pairs: Vec<(&str, String)> = pairs.into_iter().collect();
    let width = pairs.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    pairs.iter().map(|(k, v)| format!("{k:<width$}  {v}").trim_end().to_owned() + "\n").collect()
}

/// An absolute time in epoch milliseconds, as RFC 3339 (seconds) with how
/// far it is from `now_ms`: `2026-12-02T08:00:30Z (in 30s)`.
pub fn time(ms: u64, now_ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
        .unwrap_or_else(|| format!("{ms} ms"));
    format!("{at} ({})", relative(ms, now_ms))
}

/// `in 30s`, `5m ago`, `now`: the coarsest unit that fits.
pub fn relative(ms: u64, now_ms: u64) -> String {
    let (delta, future) = if ms >= now_ms { (ms - now_ms, true) } else { (now_ms - ms, false) };
    let secs = delta / 1000;
    let amount = match secs {
        0 => return "now".to_owned(),
        1..=119 => format!("{secs}s"),
        120..=7_199 => format!("{}m", secs / 60),
        7_200..=172_799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    };
    if future { format!("in {amount}") } else { format!("{amount} ago") }
}

/// An attribute value in DynamoDB's own JSON shape (`{"S": "…"}`,
/// `{"N": "1"}`, `{"M": {…}}`), as the AWS CLI prints it.
pub fn attribute_json(value: &AttributeValue) -> serde_json::Value {
    use serde_json::{Value, json};
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(b) => json!({ "NULL": b }),
        AttributeValue::M(m) => {
            let map: serde_json::Map<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), attribute_json(v))).collect();
            let mut sorted: Vec<(String, Value)> = map.into_iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            json!({ "M": Value::Object(sorted.into_iter().collect()) })
        }
        AttributeValue::L(l) => json!({ "L": l.iter().map(attribute_json).collect::<Vec<_>>() }),
        AttributeValue::Ss(ss) => json!({ "SS": ss }),
        AttributeValue::Ns(ns) => json!({ "NS": ns }),
        // Hex rather than base64: no extra dependency, and nothing in this
        // table stores binary.
        AttributeValue::B(b) => json!({ "B": hex(b.as_ref()) }),
        AttributeValue::Bs(bs) => {
            json!({ "BS": bs.iter().map(|b| hex(b.as_ref())).collect::<Vec<_>>() })
        }
        _ => json!({ "unknown": format!("{value:?}") }),
    }
}

/// The type tag and a one-line rendering of an attribute, for tables.
pub fn attribute_cell(value: &AttributeValue) -> (&'static str, String) {
    match value {
        AttributeValue::S(s) => ("S", s.clone()),
        AttributeValue::N(n) => ("N", n.clone()),
        AttributeValue::Bool(b) => ("BOOL", b.to_string()),
        AttributeValue::Null(_) => ("NULL", "null".to_owned()),
        AttributeValue::M(_) => ("M", compact(value)),
        AttributeValue::L(_) => ("L", compact(value)),
        AttributeValue::Ss(_) => ("SS", compact(value)),
        AttributeValue::Ns(_) => ("NS", compact(value)),
        AttributeValue::B(_) => ("B", compact(value)),
        AttributeValue::Bs(_) => ("BS", compact(value)),
        _ => ("?", format!("{value:?}")),
    }
}

fn compact(value: &AttributeValue) -> String {
    let json = attribute_json(value);
    // The one key of the tagged form holds the value.
    json.as_object()
        .and_then(|o| o.values().next())
        .map(|v| v.to_string())
        .unwrap_or_else(|| json.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn tables_align_columns_and_trim_lines() {
        let mut t = Table::new(["A", "LONGER"]);
        t.row(["x", "1"]);
        t.row(["wider cell", ""]);
        t.row(["only one"]);
        assert_eq!(t.render(), "A           LONGER\nx           1\nwider cell\nonly one\n");
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn times_are_absolute_and_relative() {
        let now = 1_764_662_400_000; // 2025-12-02T08:00:00Z
        assert_eq!(time(now + 30_000, now), "2025-12-02T08:00:30Z (in 30s)");
        assert_eq!(relative(now - 600_000, now), "10m ago");
        assert_eq!(relative(now + 3 * 86_400_000, now), "in 3d");
        assert_eq!(relative(now + 400, now), "now");
    }

    #[test]
    fn attributes_render_as_dynamodb_json() {
        let value = AttributeValue::M(HashMap::from([
            ("b".to_owned(), AttributeValue::N("1".into())),
            ("a".to_owned(), AttributeValue::L(vec![AttributeValue::Bool(true)])),
        ]));
        assert_eq!(
            attribute_json(&value).to_string(),
            r#"{"M":{"a":{"L":[{"BOOL":true}]},"b":{"N":"1"}}}"#
        );
        assert_eq!(attribute_cell(&AttributeValue::S("x".into())), ("S", "x".to_owned()));
        assert_eq!(attribute_cell(&value).1, r#"{"a":{"L":[{"BOOL":true}]},"b":{"N":"1"}}"#);
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1, "key", "keys"), "1 key");
        assert_eq!(count(0, "key", "keys"), "0 keys");
    }

    #[test]
    fn structured_formats() {
        assert_eq!(structured(Format::Table, &[1]).unwrap(), None);
        assert_eq!(structured(Format::Wide, &[1]).unwrap(), None);
        assert_eq!(structured(Format::Json, &[1, 2]).unwrap().unwrap(), "[1,2]\n");
        assert_eq!(structured(Format::Yaml, &[1, 2]).unwrap().unwrap(), "- 1\n- 2\n");
    }
}
