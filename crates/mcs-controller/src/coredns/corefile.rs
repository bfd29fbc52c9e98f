//! The Corefile edit of `mcs-controller coredns`, as pure functions of the
//! text: [`add`] the clusterset zone to the `kubernetes` block that serves
//! the cluster domain, [`remove`] exactly what [`add`] added, and
//! [`configure`] / [`unconfigure`] on top of them, given what an earlier
//! run recorded ([`Additions`], kept in an annotation of the ConfigMap).
//!
//! ```text
//!  kubernetes cluster.local in-addr.arpa ip6.arpa {        kubeadm's block
//!     pods insecure
//!  ─ add(zone) ─▶
//!  kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
//!     multicluster clusterset.local                        (its first line)
//!     pods insecure
//! ```
//!
//! Only what is missing is added, and [`Additions`] says which of the two
//! it was: `remove` takes away only those, so a zone or a `multicluster`
//! line written by hand stays, and `remove(add(text))` is `text` byte for
//! byte. `configure` is `add(remove(text, recorded))`, hence idempotent: a
//! second run produces the same text and the same record.
//!
//! The Corefile is read as CoreDNS's lexer reads it, as far as the edit
//! needs: lines, `#` comments, braces opening and closing blocks. A
//! `kubernetes` block is a line `kubernetes ZONES… {` directly inside a
//! server block.

use serde::{Deserialize, Serialize};

/// The cluster domain whose `kubernetes` block gets the clusterset zone.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// What [`add`] added for `zone`: recorded so that [`remove`] takes away
/// these and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Additions {
    /// The clusterset zone, e.g. `clusterset.local`.
    pub zone: String,
    /// `zone` was added to the block's zones, right after [`CLUSTER_DOMAIN`].
    pub zone_added: bool,
    /// The line `multicluster <zone>` was added as the block's first line.
    pub multicluster_line_added: bool,
}

impl Additions {
    /// Whether anything was added at all.
    pub fn any(&self) -> bool {
        self.zone_added || self.multicluster_line_added
    }
}

/// Why a Corefile cannot be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorefileError {
    /// No `kubernetes … {` block lists the cluster domain among its zones.
    #[error(
        "no `kubernetes` plugin block whose zones include {CLUSTER_DOMAIN} (expected a line \
         `kubernetes {CLUSTER_DOMAIN} … {{` inside a server block)"
    )]
    NoKubernetesBlock,
    /// Several blocks do: which one CoreDNS answers from depends on ports
    /// and zones this edit does not guess.
    #[error(
        "{0} `kubernetes` plugin blocks list {CLUSTER_DOMAIN} among their zones (lines {1}); \
         expected one"
    )]
    SeveralKubernetesBlocks(usize, String),
    /// The block has a `multicluster` option for other zones only: adding a
    /// second line would not be what CoreDNS reads.
    #[error(
        "the `kubernetes` block already has `{line}` (line {number}), without {zone}: add {zone} \
         to it by hand"
    )]
    OtherMulticluster {
        /// The option line as written, trimmed.
        line: String,
        /// Its line number, from 1.
        number: usize,
        /// The zone asked for.
        zone: String,
    },
}

/// The Corefile as [`configure`] leaves it, and what to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The new Corefile text.
    pub corefile: String,
    /// What it holds of ours; `None` when nothing had to be added.
    pub recorded: Option<Additions>,
}

/// The Corefile with `zone` served from ServiceImports: `recorded` (an
/// earlier run's additions, of this zone or another) taken away, then
/// [`add`]. Running it again on its own result changes nothing.
pub fn configure(
    corefile: &str,
    recorded: Option<&Additions>,
    zone: &str,
) -> Result<Plan, CorefileError> {
    let base = unconfigure(corefile, recorded);
    let (corefile, additions) = add(&base, zone)?;
    Ok(Plan { corefile, recorded: additions.any().then_some(additions) })
}

/// The Corefile without `recorded` (what [`configure`] added); unchanged
/// when nothing is recorded.
pub fn unconfigure(corefile: &str, recorded: Option<&Additions>) -> String {
    match recorded {
        Some(additions) => remove(corefile, additions),
        None => corefile.to_owned(),
    }
}

/// Adds what is missing for `zone` to the one `kubernetes` block that
/// serves [`CLUSTER_DOMAIN`]: `zone` after the cluster domain among its
/// zones, and `multicluster <zone>` as its first line (indented as the
/// line it precedes).
pub fn add(corefile: &str, zone: &str) -> Result<(String, Additions), CorefileError> {
    let lines = lines(corefile);
    let block = the_block(&lines)?;
    let directive = &lines[block.directive];
    let zone_present = directive.tokens().skip(1).any(|t| same_zone(t, zone));
    let mut multicluster_present = false;
    for &i in &block.options {
        let mut tokens = lines[i].tokens();
        if tokens.next() != Some("multicluster") {
            continue;
        }
        if tokens.any(|t| same_zone(t, zone)) {
            multicluster_present = true;
        } else {
            return Err(CorefileError::OtherMulticluster {
                line: lines[i].code.trim().to_owned(),
                number: i + 1,
                zone: zone.to_owned(),
            });
        }
    }

    let mut out = corefile.to_owned();
    // The later insertion first, so that the earlier one's offset holds.
    if !multicluster_present {
        let indent = block
            .options
            .first()
            .map(|&i| lines[i].indent().to_owned())
            .unwrap_or_else(|| format!("{}    ", directive.indent()));
        let at = lines.get(block.directive + 1).map_or(corefile.len(), |l| l.start);
        let newline = if directive.text.ends_with("\r\n") { "\r\n" } else { "\n" };
        // A last line without a newline (the closing brace) gets one first.
        let lead =
            if at == corefile.len() && !directive.text.ends_with('\n') { newline } else { "" };
        out.insert_str(at, &format!("{lead}{indent}multicluster {zone}{newline}"));
    }
    if !zone_present {
        let (_, end) = directive
            .token_spans()
            .find(|&(s, e)| same_zone(&directive.text[s..e], CLUSTER_DOMAIN))
            .expect("the block was chosen for its cluster domain");
        out.insert_str(directive.start + end, &format!(" {zone}"));
    }
    let additions = Additions {
        zone: zone.to_owned(),
        zone_added: !zone_present,
        multicluster_line_added: !multicluster_present,
    };
    Ok((out, additions))
}

/// Takes away `additions` from the `kubernetes` block of the cluster
/// domain: the line `multicluster <zone>` exactly as added, and the zone
/// with the one space before it. What is not found (edited since) is left
/// alone, and so is everything of a Corefile without one such block.
pub fn remove(corefile: &str, additions: &Additions) -> String {
    let lines = lines(corefile);
    let Ok(block) = the_block(&lines) else { return corefile.to_owned() };
    let directive = &lines[block.directive];
    let zone = additions.zone.as_str();
    let mut out = corefile.to_owned();
    // Later in the text first: the multicluster line, then the zone.
    if additions.multicluster_line_added {
        let added = block.options.iter().map(|&i| &lines[i]).find(|l| {
            let tokens: Vec<&str> = l.tokens().collect();
            tokens.len() == 2 && tokens[0] == "multicluster" && same_zone(tokens[1], zone)
        });
        if let Some(line) = added {
            out.replace_range(line.start..line.start + line.text.len(), "");
        }
    }
    if additions.zone_added {
        let span =
            directive.token_spans().skip(1).find(|&(s, e)| same_zone(&directive.text[s..e], zone));
        if let Some((s, e)) = span {
            // The space `add` put before it, when there is one.
            let s = if s > 0 && directive.text[..s].ends_with([' ', '\t']) { s - 1 } else { s };
            out.replace_range(directive.start + s..directive.start + e, "");
        }
    }
    out
}

/// Whether `token` names `zone` (case aside, with or without the root dot).
fn same_zone(token: &str, zone: &str) -> bool {
    let norm = |z: &str| z.trim_end_matches('.').to_ascii_lowercase();
    norm(token) == norm(zone)
}

/// One line of the Corefile, its newline included.
#[derive(Debug)]
struct Line<'a> {
    /// Byte offset of the line in the Corefile.
    start: usize,
    /// The line with its newline.
    text: &'a str,
    /// The line without its comment and newline.
    code: &'a str,
}

impl<'a> Line<'a> {
    fn tokens(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.code.split_whitespace()
    }

    /// `(start, end)` of each token, as offsets in the line.
    fn token_spans(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut at = 0;
        self.code.split_whitespace().map(move |t| {
            let s = at + self.code[at..].find(t).expect("a token of the line");
            at = s + t.len();
            (s, at)
        })
    }

    fn indent(&self) -> &'a str {
        let code = self.code;
        &code[..code.len() - code.trim_start().len()]
    }
}

fn lines(corefile: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for text in corefile.split_inclusive('\n') {
        let body = text.trim_end_matches(['\n', '\r']);
        // A comment begins with `#` at the start of a token.
        let comment = body
            .char_indices()
            .find(|&(i, c)| c == '#' && (i == 0 || body[..i].ends_with([' ', '\t'])))
            .map_or(body.len(), |(i, _)| i);
        out.push(Line { start, text, code: &body[..comment] });
        start += text.len();
    }
    out
}

/// A `kubernetes` block: its directive line and the lines of its options
/// (directly inside it), as indices of [`lines`].
#[derive(Debug)]
struct Block {
    directive: usize,
    options: Vec<usize>,
}

/// The one `kubernetes` block of a server block whose zones include
/// [`CLUSTER_DOMAIN`].
fn the_block(lines: &[Line<'_>]) -> Result<Block, CorefileError> {
    let mut found: Vec<Block> = Vec::new();
    let mut depth = 0usize;
    let mut open: Option<(Block, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let before = depth;
        for c in line.code.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if let Some((block, inside)) = open.as_mut() {
            if before == *inside && !line.code.trim().is_empty() && depth >= *inside {
                block.options.push(i);
            }
            if depth < *inside {
                found.extend(open.take().map(|(b, _)| b));
            }
            continue;
        }
        let tokens: Vec<&str> = line.tokens().collect();
        let is_block = before == 1
            && depth == 2
            && tokens.first() == Some(&"kubernetes")
            && tokens.last() == Some(&"{")
            && tokens[1..tokens.len() - 1].iter().any(|t| same_zone(t, CLUSTER_DOMAIN));
        if is_block {
            open = Some((Block { directive: i, options: Vec::new() }, depth));
        }
    }
    found.extend(open.map(|(b, _)| b));
    match found.len() {
        0 => Err(CorefileError::NoKubernetesBlock),
        1 => Ok(found.remove(0)),
        n => {
            let at: Vec<String> = found.iter().map(|b| (b.directive + 1).to_string()).collect();
            Err(CorefileError::SeveralKubernetesBlocks(n, at.join(", ")))
        }
    }
}

/// The Corefile kubeadm writes into ConfigMap `kube-system/coredns`
/// (kubeadm 1.3x): the shape [`configure`] is written for, and what the
/// tests on a real API server (tests/src/dns.rs) start from.
pub const KUBEADM_COREFILE: &str = ".:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
";

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "clusterset.local";

    fn all(zone: &str) -> Additions {
        Additions { zone: zone.into(), zone_added: true, multicluster_line_added: true }
    }

    #[test]
    fn kubeadms_corefile_gets_the_zone_and_the_multicluster_line() {
        let plan = configure(KUBEADM_COREFILE, None, ZONE).unwrap();
        let want = KUBEADM_COREFILE.replace(
            "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n",
            "    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n       \
             multicluster clusterset.local\n",
        );
        assert_eq!(plan.corefile, want);
        assert_eq!(plan.recorded, Some(all(ZONE)));
    }

    #[test]
    fn configuring_twice_changes_nothing_the_second_time() {
        let once = configure(KUBEADM_COREFILE, None, ZONE).unwrap();
        let twice = configure(&once.corefile, once.recorded.as_ref(), ZONE).unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn unconfigure_gives_back_kubeadms_corefile_byte_for_byte() {
        let plan = configure(KUBEADM_COREFILE, None, ZONE).unwrap();
        assert_eq!(unconfigure(&plan.corefile, plan.recorded.as_ref()), KUBEADM_COREFILE);
        // And on what was never configured, nothing.
        assert_eq!(unconfigure(KUBEADM_COREFILE, None), KUBEADM_COREFILE);
    }

    #[test]
    fn what_was_there_by_hand_is_neither_recorded_nor_removed() {
        let by_hand = configure(KUBEADM_COREFILE, None, ZONE).unwrap().corefile;
        let plan = configure(&by_hand, None, ZONE).unwrap();
        assert_eq!(plan, Plan { corefile: by_hand.clone(), recorded: None });
        assert_eq!(unconfigure(&by_hand, plan.recorded.as_ref()), by_hand);

        // The zone by hand, not the line: only the line is ours.
        let zone_by_hand = KUBEADM_COREFILE
            .replace("cluster.local in-addr", "cluster.local clusterset.local in-addr");
        let plan = configure(&zone_by_hand, None, ZONE).unwrap();
        let recorded = plan.recorded.clone().unwrap();
        assert!(!recorded.zone_added && recorded.multicluster_line_added, "{recorded:?}");
        assert!(plan.corefile.contains("       multicluster clusterset.local\n       pods"));
        assert_eq!(unconfigure(&plan.corefile, Some(&recorded)), zone_by_hand);
    }

    #[test]
    fn another_zone_replaces_the_recorded_one() {
        let first = configure(KUBEADM_COREFILE, None, ZONE).unwrap();
        let other = configure(&first.corefile, first.recorded.as_ref(), "mesh.example").unwrap();
        assert_eq!(other, configure(KUBEADM_COREFILE, None, "mesh.example").unwrap());
        assert!(!other.corefile.contains(ZONE), "{}", other.corefile);
        assert_eq!(unconfigure(&other.corefile, other.recorded.as_ref()), KUBEADM_COREFILE);
    }

    #[test]
    fn a_corefile_without_the_clusters_kubernetes_block_is_refused() {
        let none = ".:53 {\n    forward . /etc/resolv.conf\n}\n";
        assert_eq!(configure(none, None, ZONE), Err(CorefileError::NoKubernetesBlock));
        // Without a block of options, or for another domain: not ours to rewrite.
        for text in [
            ".:53 {\n    kubernetes cluster.local\n}\n",
            ".:53 {\n    kubernetes k8s.example {\n    }\n}\n",
            "kubernetes cluster.local {\n}\n",
        ] {
            assert_eq!(add(text, ZONE), Err(CorefileError::NoKubernetesBlock), "{text}");
        }
        let two = ".:53 {\n kubernetes cluster.local {\n }\n}\n.:54 {\n kubernetes cluster.local {\n }\n}\n";
        assert_eq!(add(two, ZONE), Err(CorefileError::SeveralKubernetesBlocks(2, "2, 6".into())));
        let message = CorefileError::NoKubernetesBlock.to_string();
        assert!(message.contains("kubernetes cluster.local … {"), "{message}");
    }

    #[test]
    fn a_multicluster_option_for_other_zones_is_refused() {
        let text = KUBEADM_COREFILE
            .replace("pods insecure", "multicluster mesh.example\n       pods insecure");
        let err = add(&text, ZONE).unwrap_err();
        assert_eq!(
            err,
            CorefileError::OtherMulticluster {
                line: "multicluster mesh.example".into(),
                number: 8,
                zone: ZONE.into()
            }
        );
    }

    #[test]
    fn comments_crlf_tabs_trailing_dots_and_nested_blocks_are_read_as_coredns_reads_them() {
        let text = "# kubernetes cluster.local {\r\n.:53 {\r\n\tkubernetes cluster.local. { # ours\r\n\t\tpods insecure\r\n\t\tnested {\r\n\t\t\tx\r\n\t\t}\r\n\t}\r\n}";
        let plan = configure(text, None, ZONE).unwrap();
        assert_eq!(
            plan.corefile,
            "# kubernetes cluster.local {\r\n.:53 {\r\n\tkubernetes cluster.local. clusterset.local { # ours\r\n\t\tmulticluster clusterset.local\r\n\t\tpods insecure\r\n\t\tnested {\r\n\t\t\tx\r\n\t\t}\r\n\t}\r\n}"
        );
        assert_eq!(unconfigure(&plan.corefile, plan.recorded.as_ref()), text);
        // An empty block: the option line indented one step in from it.
        let empty = ".:53 {\n  kubernetes cluster.local {\n  }\n}\n";
        let plan = configure(empty, None, ZONE).unwrap();
        assert_eq!(
            plan.corefile,
            ".:53 {\n  kubernetes cluster.local clusterset.local {\n      multicluster clusterset.local\n  }\n}\n"
        );
        assert_eq!(unconfigure(&plan.corefile, plan.recorded.as_ref()), empty);
    }

    #[test]
    fn removal_leaves_alone_what_was_edited_since() {
        let plan = configure(KUBEADM_COREFILE, None, ZONE).unwrap();
        // Someone widened our line: it is no longer exactly ours.
        let edited = plan.corefile.replace(
            "multicluster clusterset.local\n",
            "multicluster clusterset.local other.local\n",
        );
        let after = unconfigure(&edited, plan.recorded.as_ref());
        assert!(after.contains("multicluster clusterset.local other.local"), "{after}");
        assert!(after.contains("kubernetes cluster.local in-addr.arpa"), "{after}");
        // A Corefile rewritten without the block: nothing to take.
        let none = ".:53 {\n    forward . /etc/resolv.conf\n}\n";
        assert_eq!(unconfigure(none, plan.recorded.as_ref()), none);
    }

    #[test]
    fn the_record_is_camel_case_json() {
        let json = serde_json::to_string(&all(ZONE)).unwrap();
        assert_eq!(
            json,
            r#"{"zone":"clusterset.local","zoneAdded":true,"multiclusterLineAdded":true}"#
        );
    }
}
