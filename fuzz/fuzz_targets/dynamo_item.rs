//! The DynamoDB item decoder fed structured items: a real record's item
//! with arbitrary edits, or an item made from nothing, with the layout's
//! attribute names and key prefixes mixed into its names and strings. A
//! decode never panics, and an item that decodes re-encodes and decodes to
//! the same record.
#![no_main]

use arbitrary::Arbitrary;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use libfuzzer_sys::fuzz_target;
use mcs_api::{HostPort, RouterId, RouterReplica};
use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone, port};
use mcs_core::{Body, Key, Record, Version};
use mcs_store::dynamo::raw::{self, Item};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

/// Records of every kind, encoded as the store writes them.
fn samples() -> &'static [Item] {
    static SAMPLES: OnceLock<Vec<Item>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let router_id = RouterId::new("gr-0.us-east-1").expect("a valid router id");
        let router = Record {
            key: Key::Router { router_id: router_id.clone() },
            version: Version::new(3, "w"),
            owner: Some("inc-1".into()),
            lease_until_ms: Some(5_000),
            changed_at_ms: 4_000,
            body: Body::Router(RouterReplica {
                router_id,
                address: HostPort::new("10.0.0.1:8080").expect("a valid address"),
                location: None,
            }),
        };
        let records = [
            mk_pool("a", 1, "w", Some("x"), Some(10_000)),
            mk_tombstone("a", 3, "w"),
            mk_cluster("c1", 4, "inc", 9_000),
            mk_export("c1", "svc", 5, mk_export_spec(1_700_000_000, vec![port("http", 80)])),
            router,
        ];
        records
            .iter()
            .map(|r| raw::encode_for_fuzzing(r, "us-east-1").expect("a sample encodes"))
            .collect()
    })
}

/// Every map key and string of the samples, and the pieces keys are made of.
fn words() -> &'static [String] {
    static WORDS: OnceLock<Vec<String>> = OnceLock::new();
    WORDS.get_or_init(|| {
        fn walk(value: &AttributeValue, out: &mut BTreeSet<String>) {
            match value {
                AttributeValue::S(s) | AttributeValue::N(s) => {
                    out.insert(s.clone());
                }
                AttributeValue::M(m) => {
                    for (k, v) in m {
                        out.insert(k.clone());
                        walk(v, out);
                    }
                }
                AttributeValue::L(l) => l.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        for item in samples() {
            walk(&AttributeValue::M(item.clone()), &mut out);
        }
        for extra in [
            "CLUSTER#",
            "SVC#",
            "POOL#",
            "ROUTER#",
            "EXPORT#",
            "#",
            "@",
            "/",
            "META",
            "SCHEMA",
            "version",
            "tombstone",
            "cluster",
            "export",
            "pool",
            "router",
            "ttl",
            "Headless",
            "UDP",
            "ClientIP",
            "2",
            "0",
            "-1",
            "18446744073709551616",
            "1e3",
        ] {
            out.insert(extra.to_owned());
        }
        out.into_iter().collect()
    })
}

fn word(i: u8) -> String {
    let words = words();
    words[usize::from(i) % words.len()].clone()
}

#[derive(Arbitrary, Debug)]
enum Text {
    /// Words of the layout, concatenated.
    Words(Vec<u8>),
    Raw(String),
}

impl Text {
    fn build(&self) -> String {
        match self {
            Text::Words(ws) => ws.iter().map(|&w| word(w)).collect(),
            Text::Raw(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Number {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(Text),
}

impl Number {
    fn build(&self) -> String {
        match self {
            Number::Unsigned(n) => n.to_string(),
            Number::Signed(n) => n.to_string(),
            Number::Float(n) => n.to_string(),
            Number::Text(t) => t.build(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Value {
    S(Text),
    N(Number),
    Bool(bool),
    Null(bool),
    M(Vec<(Text, Value)>),
    L(Vec<Value>),
    Ss(Vec<Text>),
    Ns(Vec<Number>),
    B(Vec<u8>),
}

impl Value {
    fn build(&self) -> AttributeValue {
        match self {
            Value::S(t) => AttributeValue::S(t.build()),
            Value::N(n) => AttributeValue::N(n.build()),
            Value::Bool(b) => AttributeValue::Bool(*b),
            Value::Null(b) => AttributeValue::Null(*b),
            Value::M(m) => {
                AttributeValue::M(m.iter().map(|(k, v)| (k.build(), v.build())).collect())
            }
            Value::L(l) => AttributeValue::L(l.iter().map(Value::build).collect()),
            Value::Ss(s) => AttributeValue::Ss(s.iter().map(Text::build).collect()),
            Value::Ns(n) => AttributeValue::Ns(n.iter().map(Number::build).collect()),
            Value::B(b) => AttributeValue::B(Blob::new(b.clone())),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Edit {
    /// Sets an attribute, or a value at a path of maps and lists inside one.
    Set(Vec<Text>, Value),
    /// Removes an attribute, or a value at a path inside one.
    Remove(Vec<Text>),
    /// Gives the value at a path another type with the same content: a
    /// string as a number, a number as a string, a map as a list.
    Retype(Vec<Text>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// `Some(i)`: start from sample `i`; `None`: from an empty item.
    base: Option<u8>,
    edits: Vec<Edit>,
}

/// The value at `path` under `map`, or `None` when the path leads nowhere;
/// a list is indexed by the length of a step's text.
fn slot<'a>(
    map: &'a mut HashMap<String, AttributeValue>,
    path: &[String],
) -> Option<(&'a mut HashMap<String, AttributeValue>, String)> {
    let (last, init) = path.split_last()?;
    let mut here = map;
    for step in init {
        let mut value = here.get_mut(step)?;
        while let AttributeValue::L(list) = value {
            let len = list.len();
            if len == 0 {
                return None;
            }
            value = &mut list[step.len() % len];
        }
        here = match value {
            AttributeValue::M(m) => m,
            _ => return None,
        };
    }
    Some((here, last.clone()))
}

fn apply(item: &mut Item, edit: &Edit) {
    match edit {
        Edit::Set(path, value) => {
            let path: Vec<String> = path.iter().map(Text::build).collect();
            if let Some((map, name)) = slot(item, &path) {
                map.insert(name, value.build());
            }
        }
        Edit::Remove(path) => {
            let path: Vec<String> = path.iter().map(Text::build).collect();
            if let Some((map, name)) = slot(item, &path) {
                map.remove(&name);
            }
        }
        Edit::Retype(path) => {
            let path: Vec<String> = path.iter().map(Text::build).collect();
            if let Some((map, name)) = slot(item, &path) {
                let retyped = match map.get(&name) {
                    Some(AttributeValue::S(s)) => AttributeValue::N(s.clone()),
                    Some(AttributeValue::N(n)) => AttributeValue::S(n.clone()),
                    Some(AttributeValue::Bool(b)) => AttributeValue::S(b.to_string()),
                    Some(AttributeValue::M(m)) => AttributeValue::L(m.values().cloned().collect()),
                    Some(AttributeValue::L(l)) => AttributeValue::Ss(
                        l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
                    ),
                    _ => return,
                };
                map.insert(name, retyped);
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let samples = samples();
    let mut item = match input.base {
        Some(i) => samples[usize::from(i) % samples.len()].clone(),
        None => Item::new(),
    };
    for edit in &input.edits {
        apply(&mut item, edit);
    }
    let Ok(record) = raw::decode(item.clone()) else { return };
    let origin = raw::origin_of(&item).expect("a decoded item names its origin");
    let again = raw::encode_for_fuzzing(&record, &origin).expect("a decoded record encodes");
    match raw::decode(again.clone()) {
        Ok(back) => assert_eq!(back, record, "re-encoded as {again:?}"),
        Err(e) => panic!("{record:?} re-encoded as {again:?} does not decode: {e}"),
    }
});
