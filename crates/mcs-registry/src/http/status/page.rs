//! The `/status` page: the status document as HTML, rendered on the server
//! (maud: compiled templates, every value escaped), readable without
//! scripts. Where scripts run, one inline script follows the view: it
//! asks for the page again once the view changed (the long-poll of
//! `GET /status?after=EPOCH`) and swaps in the new main part.
//!
//! Findings come first, then the view, the reader, the hold, the clusters
//! ([`CLUSTERS_PER_PAGE`] a page, with links to the others; each row counts
//! the cluster's pools), the pools grouped by cluster (as many a page), so
//! 1,000 pools read as counts, not 1,000 rows, and the conflicts. Accessibility basics: one `h1`, an `h2` per part,
//! tables with captions and `th` headers of a scope, severity said in
//! words (not only in colour), colours of a contrast above 7:1 on white.

use maud::{DOCTYPE, Markup, html};
use mcs_api::status::{Severity, Status, human_ms};

/// Clusters listed on one page.
pub const CLUSTERS_PER_PAGE: usize = 50;

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#111111;background:#ffffff;line-height:1.4}
table{border-collapse:collapse;margin:.5rem 0}
th,td{border:1px solid #888;padding:.25rem .5rem;text-align:left}
th{background:#eeeeee}
caption{text-align:left;font-weight:bold;padding:.25rem 0}
.critical{color:#8b0000}
.warning{color:#5c3d00}
.ok{color:#0a4a18}
code{background:#f2f2f2;padding:0 .2rem}
nav a{margin-right:.75rem}
";

/// Follows the view live where scripts run: asks for the page again with
/// `?after=` the epoch it shows, which the registry answers once the view
/// changed (or after a while), and swaps in the new main part; after an
/// error, waits 5 s. The page needs none of it.
const FOLLOW: &str = "(async()=>{let m=document.querySelector('main');for(;;){try{\
const u=new URL(location.href);u.searchParams.set('after',m.dataset.epoch);\
const r=await fetch(u,{cache:'no-store'});if(!r.ok)throw r.status;\
const d=new DOMParser().parseFromString(await r.text(),'text/html');\
const n=d.querySelector('main');if(n){m.replaceWith(n);m=n;}\
}catch(e){await new Promise(s=>setTimeout(s,5000));}}})();";

/// The page of `status`, with the `page`-th page of clusters (1-based,
/// clamped to the pages there are), showing the view as of `epoch` (its
/// change counter, for the script's next wait).
pub fn render(status: &Status, page: usize, epoch: u64) -> Markup {
    let p = &status.process;
    let title = match &p.region {
        Some(region) => format!("mcs-registry status: {region}"),
        None => "mcs-registry status".to_owned(),
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (STYLE) }
            }
            body {
                header {
                    h1 { (title) }
                    p {
                        "Writer " code { (p.writer_id) } ", storage " (p.storage)
                        ", version " (p.version) ", schema " (p.schema_version)
                        ", up " (human_ms(p.uptime_secs.saturating_mul(1000)))
                        ", ready: " (yes(p.ready)) "."
                    }
                }
                main data-epoch=(epoch) { (body(status, page)) }
                script { (maud::PreEscaped(FOLLOW)) }
            }
        }
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn body(status: &Status, page: usize) -> Markup {
    html! {
        (findings(status))
        (view(status))
        (reader(status))
        (hold(status))
        (clusters(status, page))
        (pools(status, page))
        (conflicts(status))
    }
}

/// A section `id` headed `title (count)`: `none` when the count is 0, else
/// `items`.
fn counted(id: &str, title: &str, count: usize, none: &str, items: Markup) -> Markup {
    let heading = format!("{id}-h");
    html! {
        section id=(id) aria-labelledby=(heading) {
            h2 id=(heading) { (title) " (" (count) ")" }
            @if count == 0 { p class="ok" { (none) } } @else { (items) }
        }
    }
}

fn findings(status: &Status) -> Markup {
    let items = html! {
        ul {
            @for finding in &status.findings {
                li class={ "finding " (finding.severity.as_str()) } data-code=(finding.code) {
                    strong { (severity(finding.severity)) } " " (finding.message)
                    " (runbook: " code { (finding.runbook) } ")"
                }
            }
        }
    };
    let none = "No findings: the registry serves complete lists and nothing needs an operator.";
    counted("findings", "Findings", status.findings.len(), none, items)
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "CRITICAL",
        Severity::Warning => "WARNING",
    }
}

fn view(status: &Status) -> Markup {
    let v = &status.view;
    let why: Vec<&str> = v.incomplete_because.iter().map(|r| r.as_str()).collect();
    html! {
        section id="view" aria-labelledby="view-h" {
            h2 id="view-h" { "View" }
            @if v.complete {
                p id="complete" class="ok" { "Lists are complete." }
            } @else {
                p id="complete" class="critical" { "Lists are incomplete: " (why.join(", ")) "." }
            }
            table {
                caption { "Sections" }
                thead { tr { th scope="col" { "section" } th scope="col" { "items" } th scope="col" { "fingerprint" } } }
                tbody {
                    @for s in &v.sections {
                        tr { th scope="row" { (s.section) } td { (s.items) } td { code { (s.fingerprint) } } }
                    }
                }
            }
        }
    }
}

fn reader(status: &Status) -> Markup {
    let r = &status.reader;
    let age = |ms: Option<u64>| ms.map_or("never".to_owned(), |ms| format!("{} ago", human_ms(ms)));
    let errors: Vec<String> =
        r.storage_errors.iter().map(|e| format!("{} {}", e.count, e.kind)).collect();
    html! {
        section id="reader" aria-labelledby="reader-h" {
            h2 id="reader-h" { "Reader" }
            dl {
                dt { "Last successful poll" } dd id="last-poll" { (age(r.last_poll_age_ms))
                    @if let Some(kind) = r.last_poll { " (" (if kind == mcs_api::status::PollKind::Full { "full" } else { "delta" }) ")" } }
                dt { "Last full read" } dd { (age(r.last_full_read_age_ms)) }
                dt { "Failed polls in a row" } dd { (r.failed_polls_in_a_row) }
                dt { "Storage errors" } dd { @if errors.is_empty() { "none" } @else { (errors.join(", ")) } }
            }
        }
    }
}

fn hold(status: &Status) -> Markup {
    let h = &status.hold;
    html! {
        section id="hold" aria-labelledby="hold-h" {
            h2 id="hold-h" { "Mass-expiry hold" }
            @if h.active {
                p class="critical hold-active" {
                    strong { "Holding expiries" } " of " (h.held_leases) " leases"
                    @if let Some(ms) = h.since_ms_ago { " for " (human_ms(ms)) }
                    " (at most " (human_ms(h.max_hold_ms)) ")."
                }
            } @else {
                p class="ok" { "No hold." }
            }
            p { "Pools: " (status.pools.count) " (" (status.pools.expiring_soon) " expiring soon). Routers: "
                (status.routers.count) " (" (status.routers.expiring_soon) " expiring soon)." }
        }
    }
}

fn clusters(status: &Status, page: usize) -> Markup {
    let pages = status.clusters.len().div_ceil(CLUSTERS_PER_PAGE).max(1);
    let page = page.clamp(1, pages);
    let shown = status.clusters.iter().skip((page - 1) * CLUSTERS_PER_PAGE).take(CLUSTERS_PER_PAGE);
    html! {
        section id="clusters" aria-labelledby="clusters-h" {
            h2 id="clusters-h" { "Clusters (" (status.clusters.len()) ")" }
            @if pages > 1 {
                nav aria-label="cluster pages" {
                    @for n in 1..=pages {
                        @if n == page { strong aria-current="page" { "page " (n) } " " }
                        @else { a href={ "?page=" (n) } { "page " (n) } }
                    }
                }
            }
            table {
                caption { "Clusters, page " (page) " of " (pages) }
                thead { tr {
                    th scope="col" { "cluster" } th scope="col" { "incarnation" }
                    th scope="col" { "renewed" } th scope="col" { "expires in" }
                    th scope="col" { "exports" } th scope="col" { "conflicts" } th scope="col" { "pools" }
                } }
                tbody {
                    @for c in shown {
                        tr data-cluster=(c.cluster_id) {
                            th scope="row" { (c.cluster_id) @if c.at_risk { " " span class="warning" { "(at risk)" } } }
                            td { code { (c.incarnation) } }
                            td { (c.renewed_ms_ago.map_or("?".to_owned(), |ms| format!("{} ago", human_ms(ms)))) }
                            td { (c.expires_in_ms.map_or("?".to_owned(), human_ms)) }
                            td { (c.exports) }
                            td class=@if c.conflicts > 0 { "warning" } { (c.conflicts) }
                            td { (c.pools) }
                        }
                    }
                }
            }
        }
    }
}

/// The pools by cluster, [`CLUSTERS_PER_PAGE`] clusters a page (the
/// `page` of the clusters' table).
fn pools(status: &Status, page: usize) -> Markup {
    let groups = &status.pools.per_cluster;
    let pages = groups.len().div_ceil(CLUSTERS_PER_PAGE).max(1);
    let page = page.clamp(1, pages);
    let shown = groups.iter().skip((page - 1) * CLUSTERS_PER_PAGE).take(CLUSTERS_PER_PAGE);
    html! {
        section id="pools" aria-labelledby="pools-h" {
            h2 id="pools-h" { "Pools by cluster (" (status.pools.count) " pools, " (groups.len()) " clusters)" }
            table {
                caption { "Pools by the cluster their keys name, page " (page) " of " (pages) }
                thead { tr { th scope="col" { "cluster" } th scope="col" { "pools" } th scope="col" { "expiring soon" } } }
                tbody {
                    @for g in shown {
                        tr data-pool-cluster=(g.cluster_id) {
                            th scope="row" { (g.cluster_id) }
                            td { (g.pools) }
                            td class=@if g.expiring_soon > 0 { "warning" } { (g.expiring_soon) }
                        }
                    }
                }
            }
        }
    }
}

fn conflicts(status: &Status) -> Markup {
    let items = html! {
        table {
            caption { "Services whose exports conflict" }
            thead { tr { th scope="col" { "service" } th scope="col" { "clusters" } th scope="col" { "reason" } th scope="col" { "message" } } }
            tbody {
                @for c in &status.conflicts {
                    @let clusters: Vec<&str> = c.clusters.iter().map(|l| l.as_str()).collect();
                    tr data-service={ (c.namespace) "/" (c.name) } {
                        th scope="row" { (c.namespace) "/" (c.name) }
                        td { (clusters.join(", ")) }
                        td { (c.reason) }
                        td { (c.message) }
                    }
                }
            }
        }
    };
    let none = "No exported service is in conflict.";
    counted("conflicts", "Conflicts", status.conflicts.len(), none, items)
}

#[cfg(test)]
mod tests {
    use super::STYLE;

    /// WCAG's relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let channel = |i: usize| {
            let c = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap()) / 255.0;
            if c <= 0.039_28 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    }

    fn contrast(a: &str, b: &str) -> f64 {
        let (a, b) = (luminance(a), luminance(b));
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    /// Every text colour of the style reads at WCAG AAA (7:1) on the white
    /// page and on the grey of the table headers.
    #[test]
    fn every_text_colour_has_a_contrast_of_seven_to_one() {
        let colours: Vec<&str> = STYLE
            .split("color:")
            .skip(1)
            .map(|rest| rest.split([';', '}']).next().unwrap())
            .collect();
        assert_eq!(colours, ["#111111", "#8b0000", "#5c3d00", "#0a4a18"], "{STYLE}");
        // The page, the table headers, code.
        for background in ["#ffffff", "#eeeeee", "#f2f2f2"] {
            assert!(STYLE.contains(&format!("background:{background}")), "{background}");
            for colour in &colours {
                let ratio = contrast(colour, background);
                assert!(ratio >= 7.0, "{colour} on {background}: {ratio:.2}");
            }
        }
        assert!(contrast("#777777", "#ffffff") < 7.0, "the check can fail");
    }
}
