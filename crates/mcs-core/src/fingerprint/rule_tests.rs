//! A section's version is the cheap cache key of its served content.

use super::*;

#[test]
fn every_change_of_served_content_bumps_the_version_and_nothing_else_does() {
    let mut s = Section::new("t");
    assert_eq!(s.version(), 0);
    let mut seen = vec![s.version()];
    s.upsert(1, "a".to_string());
    seen.push(s.version());
    s.upsert(1, "a".to_string());
    assert_eq!(s.version(), seen[1], "the same content is no change");
    s.upsert(1, "b".to_string());
    seen.push(s.version());
    s.upsert(2, "c".to_string());
    seen.push(s.version());
    s.remove(&1);
    seen.push(s.version());
    s.remove(&1);
    assert_eq!(s.version(), seen[4], "removing what is not served is no change");
    assert_eq!(seen, [0, 1, 2, 3, 4], "one step per change");
}

#[test]
fn a_section_is_empty_until_something_is_served() {
    let mut s = Section::new("t");
    assert!(s.is_empty());
    s.upsert(1, 1);
    assert!(!s.is_empty());
    s.remove(&1);
    assert!(s.is_empty());
}
