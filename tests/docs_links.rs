//! The docs hold together: every relative link and `#anchor` of the
//! repository's Markdown files (README.md, docs/, migrations/, ...) resolves
//! to an existing file and heading, and every section of docs/design.md that
//! code, scripts or docs cite (`docs/design.md §n`, or `§n` inside the
//! design itself) is one of its numbered sections. Anchors follow GitHub's
//! rules: the heading lowercased, spaces to hyphens, punctuation dropped,
//! `-1`, `-2`, ... for repeats. Intra-doc links of the code are checked by
//! `cargo doc` with warnings denied (scripts/test).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_tests::workspace_root;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The design, relative to the workspace root.
const DESIGN: &str = "docs/design.md";

/// Files under `root` whose name ends with one of `extensions`, skipping
/// build output and hidden directories (`.git`, the moto venv).
fn files(root: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                if !name.starts_with('.')
                    && !matches!(name.as_str(), "target" | "corpus" | "artifacts")
                {
                    dirs.push(path);
                }
            } else if extensions.iter().any(|ext| name.ends_with(&format!(".{ext}"))) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The lines of a Markdown text outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// `line` without its inline code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// GitHub's anchor of a heading's text.
fn slug(heading: &str) -> String {
    // A link in a heading contributes its text only.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find("](") {
        text.push_str(&rest[..start]);
        rest = rest[start..].find(')').map_or("", |end| &rest[start + end + 1..]);
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The headings of a Markdown text: level and text, outside code blocks.
fn headings(text: &str) -> Vec<(usize, String)> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let level = line.chars().take_while(|&c| c == '#').count();
            let title = line[level..].strip_prefix(' ')?;
            (1..=6)
                .contains(&level)
                .then(|| (level, title.trim().trim_end_matches('#').trim().to_owned()))
        })
        .collect()
}

/// Every anchor a Markdown text's headings define, repeats numbered as
/// GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, heading) in headings(text) {
        let base = slug(&heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// The targets of the inline links and images of a Markdown text, with
/// their line numbers (code blocks and code spans excluded).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            // `(<target> "title")`: the target is the first word.
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            found.push((number, target.trim_matches(['<', '>']).to_owned()));
            rest = &rest[end..];
        }
    }
    found
}

/// What does not resolve among the relative links of the Markdown file
/// `file`, one message each.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut broken = Vec::new();
    for (line, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved =
            if path.is_empty() { file.to_path_buf() } else { file.parent().unwrap().join(path) };
        let at = format!("{}:{line}: ({target})", file.display());
        if !resolved.exists() {
            broken.push(format!("{at}: no file {}", resolved.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if resolved.extension().is_some_and(|ext| ext == "md") {
            let anchors = anchors(&std::fs::read_to_string(&resolved).unwrap());
            if !anchors.contains(anchor) {
                broken.push(format!("{at}: no heading #{anchor} (it has {anchors:?})"));
            }
        }
    }
    broken
}

/// The numbers of the sections `text` cites as `{prefix}§n`: `§4`,
/// `§4, §6`, `§1, §9 and §10`, or a range `§4–§7` (every section of it),
/// with the line of each.
fn cited_sections(text: &str, prefix: &str) -> Vec<(usize, u32)> {
    let number = |s: &str| -> Option<(u32, usize)> {
        let s = s.strip_prefix('§')?;
        let digits = s.chars().take_while(char::is_ascii_digit).count();
        Some((s[..digits].parse().ok()?, '§'.len_utf8() + digits))
    };
    let start_of_citation = format!("{prefix}§");
    let mut cited = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find(&start_of_citation) {
            rest = &rest[start + prefix.len()..];
            let Some((mut last, len)) = number(rest) else {
                rest = &rest['§'.len_utf8()..];
                continue;
            };
            cited.push((i + 1, last));
            rest = &rest[len..];
            loop {
                let (range, after) = if let Some(r) = rest.strip_prefix('–') {
                    (true, r)
                } else if let Some(r) =
                    rest.strip_prefix(", ").or_else(|| rest.strip_prefix(" and "))
                {
                    (false, r)
                } else {
                    break;
                };
                let Some((n, len)) = number(after) else { break };
                let from = if range { last + 1 } else { n };
                cited.extend((from..=n).map(|k| (i + 1, k)));
                last = n;
                rest = &after[len..];
            }
        }
    }
    cited
}

/// The numbers of the design's `## n. Title` sections.
fn numbered_sections(design: &str) -> Vec<u32> {
    headings(design)
        .into_iter()
        .filter(|(level, _)| *level == 2)
        .filter_map(|(_, title)| title.split_once(". ")?.0.parse().ok())
        .collect()
}

/// Every citation of a design section in `files` that names no numbered
/// section of `design`, and every citation of the former design outside
/// the repository.
fn broken_citations(design_file: &Path, files: &[PathBuf]) -> Vec<String> {
    let design = std::fs::read_to_string(design_file).unwrap();
    let sections = numbered_sections(&design);
    let missing = |file: &Path, cited: Vec<(usize, u32)>| -> Vec<String> {
        cited
            .into_iter()
            .filter(|(_, n)| !sections.contains(n))
            .map(|(line, n)| {
                format!(
                    "{}:{line}: cites {DESIGN} §{n}, which has sections {sections:?}",
                    file.display()
                )
            })
            .collect()
    };
    let mut broken = missing(design_file, cited_sections(&design, ""));
    let old = concat!("DESIGN", " §");
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        broken.extend(missing(file, cited_sections(&text, &format!("{DESIGN} "))));
        for (i, line) in text.lines().enumerate() {
            if line.contains(old) {
                broken.push(format!(
                    "{}:{}: cites the design outside the repository; cite {DESIGN} §n",
                    file.display(),
                    i + 1
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = workspace_root();
    let markdown = files(&root, &["md"]);
    for wanted in ["README.md", DESIGN, "docs/api.md", "migrations/README.md"] {
        assert!(markdown.contains(&root.join(wanted)), "{wanted} is checked: {markdown:?}");
    }
    let broken: Vec<String> = markdown.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_cited_design_section_exists() {
    let root = workspace_root();
    let design = root.join(DESIGN);
    let sections = numbered_sections(&std::fs::read_to_string(&design).unwrap());
    let expected: Vec<u32> = (1..=u32::try_from(sections.len()).unwrap()).collect();
    assert_eq!(sections, expected, "the design's sections are numbered 1, 2, ... in order");
    let files = files(&root, &["rs", "md", "toml", "sh", "py", "yml", "yaml"]);
    let cited: usize = files
        .iter()
        .map(|f| cited_sections(&std::fs::read_to_string(f).unwrap(), &format!("{DESIGN} ")).len())
        .sum();
    assert!(cited >= 20, "the code cites the design ({cited} citations found)");
    let broken = broken_citations(&design, &files);
    assert!(broken.is_empty(), "citations of missing sections:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(slug("9. Guarantees"), "9-guarantees");
    assert_eq!(
        slug("3. Storage layout (DynamoDB, one table)"),
        "3-storage-layout-dynamodb-one-table"
    );
    assert_eq!(slug("Typical, not guaranteed"), "typical-not-guaranteed");
    assert_eq!(slug("How `migrate` applies them"), "how-migrate-applies-them");
    assert_eq!(slug("Metrics (admin port, `/metrics`)"), "metrics-admin-port-metrics");
    assert_eq!(slug("dump and restore"), "dump-and-restore");
    assert_eq!(slug("a_b [link](x.md) c"), "a_b-link-c");
    let text = "# A\n## B\n```\n# not a heading\n```\n## B\n### b!\n";
    assert_eq!(anchors(text), BTreeSet::from(["a", "b", "b-1", "b-2"].map(String::from)));
}

#[test]
fn the_checks_catch_what_does_not_resolve() {
    let dir = std::env::temp_dir().join(format!("mcs-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/design.md"), "# D\n## 1. One\n## 2. Two thing\n").unwrap();
    std::fs::write(
        dir.join("README.md"),
        "[ok](docs/design.md) [ok](docs/design.md#2-two-thing) [ok](#r) [ok](https://x.invalid/y)\n\
         `[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n# R\n\
         [gone](docs/gone.md) [no anchor](docs/design.md#3-three)\n\
         [no local anchor](#s) [ok dir](docs/) [gone dir](other/)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("code.rs"),
        "//! docs/design.md §1, §2 and docs/design.md §1–§2; docs/design.md §n\n\
         //! docs/design.md §3 then docs/design.md §1–§4\n",
    )
    .unwrap();
    let broken = broken_links(&dir.join("README.md"));
    let expected = [
        "(docs/gone.md): no file",
        "(docs/design.md#3-three): no heading #3-three",
        "(#s): no heading #s",
        "(other/): no file",
    ];
    assert_eq!(broken.len(), expected.len(), "{broken:#?}");
    for (found, expected) in broken.iter().zip(expected) {
        assert!(found.contains(expected), "{found} should say {expected}");
    }

    let cited =
        cited_sections(&std::fs::read_to_string(dir.join("code.rs")).unwrap(), "docs/design.md ");
    assert_eq!(cited, vec![(1, 1), (1, 2), (1, 1), (1, 2), (2, 3), (2, 1), (2, 2), (2, 3), (2, 4)]);
    let broken = broken_citations(&dir.join("docs/design.md"), &[dir.join("code.rs")]);
    assert_eq!(broken.len(), 3, "§3 twice and §4 once: {broken:#?}");
    std::fs::write(dir.join("old.rs"), format!("//! {} §4\n", "DESIGN")).unwrap();
    let broken = broken_citations(&dir.join("docs/design.md"), &[dir.join("old.rs")]);
    assert_eq!(broken.len(), 1, "{broken:#?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
