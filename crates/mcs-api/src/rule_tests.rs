//! The contract's rules pinned at their boundaries, across the request
//! types: what a request may ask for and what each field accepts.

use crate::testutil::parse;
use crate::*;

#[test]
fn a_lease_of_exactly_one_day_may_be_asked_for_and_not_a_second_more() {
    let day = Lease::new(Lease::MAX_DURATION_SECS, 60).unwrap();
    assert_eq!(requested_lease_fits(Some(&day)), Ok(()));
    let more = Lease::new(Lease::MAX_DURATION_SECS + 1, 60).unwrap();
    assert_eq!(requested_lease_fits(Some(&more)).unwrap_err().field, "lease.duration_secs");
    assert_eq!(requested_lease_fits(None), Ok(()), "the registry's default lease");
}

#[test]
fn a_cluster_registration_is_checked_like_any_other() {
    let too_long: ClusterRegistration = parse(
        r#"{"incarnation":"9a0e","lease":{"duration_secs":86401,"heartbeat_interval_secs":10}}"#,
    )
    .unwrap();
    assert_eq!(too_long.validate().unwrap_err().field, "lease.duration_secs");
    let zero: ClusterRegistration = parse(r#"{"incarnation":"9a0e","generation":0}"#).unwrap();
    assert_eq!(zero.validate().unwrap_err().field, "generation");
}

#[test]
fn the_longest_lease_a_writer_may_ask_for_is_86400_seconds() {
    let lease = |secs: u64| {
        parse::<ClusterRegistration>(&format!(
            r#"{{"incarnation":"9a0e","lease":{{"duration_secs":{secs},"heartbeat_interval_secs":10}}}}"#
        ))
        .unwrap()
    };
    assert_eq!(lease(86_400).validate(), Ok(()));
    assert_eq!(lease(86_401).validate().unwrap_err().field, "lease.duration_secs");
}

#[test]
fn a_field_error_reads_as_its_path_then_what_is_wrong() {
    let e = FieldError::new("pool_key.namespace", "must be a DNS-1123 label");
    assert_eq!(e.to_string(), "pool_key.namespace: must be a DNS-1123 label");
}

#[test]
fn a_pool_id_is_exactly_32_lowercase_hex_digits() {
    assert!(PoolId::parse("3677f1ffda5a8ecb71747eca0d38615c").is_ok());
    assert!(PoolId::parse("3677F1FFDA5A8ECB71747ECA0D38615C").is_err(), "uppercase");
    assert!(PoolId::parse("3677f1ffda5a8ecb71747eca0d38615g").is_err(), "not hex");
    assert!(PoolId::parse("3677f1ffda5a8ecb71747eca0d38615").is_err(), "31 digits");
    assert!(PoolId::parse("3677f1ffda5a8ecb71747eca0d38615c0").is_err(), "33 digits");
}

/// Ids and names reach paths, logs, error bodies and storage keys as the
/// text they were given: `as_str`, `Display` and `String::from` agree.
#[test]
fn every_scalar_shows_as_the_text_it_was_given() {
    fn shows<T: std::fmt::Display + Clone + Into<String>>(value: T, as_str: &str, text: &str) {
        assert_eq!(as_str, text);
        assert_eq!(value.to_string(), text);
        assert_eq!(Into::<String>::into(value), text);
    }
    let label = Label::new("us-east-1a").unwrap();
    shows(label.clone(), label.as_str(), "us-east-1a");
    let model = NonBlank::new("meta-llama/Llama-3.1-8B").unwrap();
    shows(model.clone(), model.as_str(), "meta-llama/Llama-3.1-8B");
    let incarnation = Incarnation::new("5f1c-9a0e:2").unwrap();
    shows(incarnation.clone(), incarnation.as_str(), "5f1c-9a0e:2");
    let address = HostPort::new("10.0.1.7:9000").unwrap();
    shows(address.clone(), address.as_str(), "10.0.1.7:9000");
    let pool_id = PoolId::parse("3677f1ffda5a8ecb71747eca0d38615c").unwrap();
    shows(pool_id.clone(), pool_id.as_str(), "3677f1ffda5a8ecb71747eca0d38615c");
    let router_id = RouterId::new("gr-0.us-east-1").unwrap();
    shows(router_id.clone(), router_id.as_str(), "gr-0.us-east-1");
}

#[test]
fn a_relay_presents_itself_from_at_most_64_identities() {
    let with_identities = |n: usize| {
        let identities: Vec<String> = (0..n).map(|i| format!("\"10.0.0.{i}\"")).collect();
        parse::<PoolRegistration>(&format!(
            r#"{{"pool_key":{{"cluster_id":"c1","namespace":"llm","dgd_name":"llama"}},
                "model":"m","location":{{"region":"us-east-1"}},"capacity":{{"workers":1}},
                "relay_address":"10.0.1.7:9000","relay_identities":[{}]}}"#,
            identities.join(",")
        ))
        .unwrap()
    };
    assert_eq!(with_identities(64).validate(), Ok(()));
    assert_eq!(with_identities(65).validate().unwrap_err().field, "relay_identities");
}

/// An export of `ports` (JSON) with `affinity` (JSON fields, or empty).
fn export(ports: &str, affinity: &str) -> ExportRequest {
    parse(&format!(
        r#"{{"type":"ClusterSetIP","ports":{ports},"exported_at":"2026-12-02T08:00:00Z"{affinity}}}"#
    ))
    .unwrap()
}

#[test]
fn a_lone_port_may_go_unnamed_but_not_one_of_several() {
    assert_eq!(export(r#"[{"name":"","port":80}]"#, "").validate(), Ok(()));
    let two = export(r#"[{"name":"","port":80},{"name":"grpc","port":9090}]"#, "");
    assert_eq!(two.validate().unwrap_err().field, "ports[0].name");
}

#[test]
fn a_client_ip_affinity_timeout_is_1_to_86400_seconds() {
    let with_timeout = |secs: u32| {
        export(
            r#"[{"name":"http","port":80}]"#,
            &format!(r#","session_affinity":"ClientIP","session_affinity_timeout_secs":{secs}"#),
        )
        .validate()
    };
    assert_eq!(with_timeout(1), Ok(()));
    assert_eq!(with_timeout(10_800), Ok(()));
    assert_eq!(with_timeout(86_400), Ok(()));
    assert_eq!(with_timeout(0).unwrap_err().field, "session_affinity_timeout_secs");
    assert_eq!(with_timeout(86_401).unwrap_err().field, "session_affinity_timeout_secs");
}

#[test]
fn the_documented_schema_of_endpoint_addresses_is_ipv4_or_ipv6() {
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(Endpoint::schema()).unwrap();
    let items = &schema["properties"]["addresses"]["items"]["oneOf"];
    let formats: Vec<&str> =
        items.as_array().unwrap().iter().map(|s| s["format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["ipv4", "ipv6"], "{schema}");
}

#[test]
fn export_keys_and_service_names_read_as_their_paths_in_logs_and_diffs() {
    let label = |s: &str| Label::new(s).unwrap();
    let key = ExportKey { cluster_id: label("east"), namespace: label("llm"), name: label("web") };
    assert_eq!(key.to_string(), "east/llm/web");
    assert_eq!(key.service().to_string(), "llm/web");
}
