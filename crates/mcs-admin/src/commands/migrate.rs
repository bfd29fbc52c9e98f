//! `migrate`: applies the table's missing migrations and repairs what
//! drifted from what they declare (`mcs_store::dynamo::migrate`), and says
//! what it did. A second run has nothing to do; a table at a newer schema
//! than this binary is left alone and reported (exit 1). An absent table is
//! created only with `--create`: without it, migrate exits 1 naming the
//! region and endpoint where it looked. `--to N` stops at version N (a
//! rolling upgrade, docs/operations.md).

use super::DEFAULT_RETENTION;
use crate::Exit;
use crate::cli::{GlobalArgs, MigrateArgs};
use crate::connect::Location;
use crate::output::{self, Format};
use mcs_store::StoreError;
use mcs_store::dynamo::MigrationReport;
use serde::Serialize;

/// What `migrate -o json|yaml` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    table: &'a str,
    from_version: Option<u32>,
    to_version: u32,
    up_to_date: bool,
    applied: Vec<Applied<'a>>,
    repaired: &'a [String],
}

#[derive(Debug, Serialize)]
struct Applied<'a> {
    version: u32,
    description: &'a str,
    actions: &'a [String],
}

pub(super) async fn run(global: &GlobalArgs, args: &MigrateArgs) -> anyhow::Result<Exit> {
    let location = Location::of(global)?;
    let store = location.open(DEFAULT_RETENTION).await?;
    if !args.create && !store.table_exists().await? {
        let target = store.target();
        anyhow::bail!(
            "table {} is absent in region {} at endpoint {}: pass --create if creating it there \
             is intended (else check --table, --region and --dynamodb-endpoint)",
            target.table,
            target.region,
            target.endpoint
        );
    }
    let report = match store.migrate_to(args.to).await {
        Ok(report) => report,
        Err(StoreError::SchemaTooNew { found, known }) => anyhow::bail!(
            "table {} is at schema version {found}, newer than this mcs-admin knows ({known}): \
             left alone; use a newer mcs-admin",
            location.describe()
        ),
        Err(e) => return Err(e.into()),
    };
    output::print(&render(&report, global.output)?)?;
    Ok(Exit::Ok)
}

fn render(report: &MigrationReport, format: Format) -> anyhow::Result<String> {
    let structured = Report {
        table: &report.table,
        from_version: report.from_version,
        to_version: report.to_version,
        up_to_date: report.is_up_to_date(),
        applied: report
            .applied
            .iter()
            .map(|m| Applied {
                version: m.version,
                description: &m.description,
                actions: &m.actions,
            })
            .collect(),
        repaired: &report.repaired,
    };
    if let Some(text) = output::structured(format, &structured)? {
        return Ok(text);
    }
    let mut text = report.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_store::dynamo::AppliedMigration;

    #[test]
    fn reports_render_in_every_format() {
        let done = MigrationReport {
            table: "t".into(),
            from_version: None,
            to_version: 1,
            applied: vec![AppliedMigration {
                version: 1,
                description: "create".into(),
                actions: vec!["created table".into()],
            }],
            repaired: vec![],
        };
        assert_eq!(
            render(&done, Format::Table).unwrap(),
            "table t: schema version none -> 1\n  0001 create: created table\n"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render(&done, Format::Json).unwrap()).unwrap();
        assert_eq!(json["applied"][0]["actions"][0], "created table");
        assert_eq!(json["up_to_date"], false);
        let idle = MigrationReport { from_version: Some(1), applied: vec![], ..done };
        assert_eq!(
            render(&idle, Format::Table).unwrap(),
            "table t is at schema version 1: nothing to do\n"
        );
        assert!(render(&idle, Format::Yaml).unwrap().contains("up_to_date: true"));
        let repaired = MigrationReport { repaired: vec!["enabled ttl on ttl".into()], ..idle };
        assert_eq!(
            render(&repaired, Format::Table).unwrap(),
            "table t is at schema version 1: repaired what had drifted from it\n  repaired: enabled ttl on ttl\n"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render(&repaired, Format::Json).unwrap()).unwrap();
        assert_eq!(json["up_to_date"], false);
        assert_eq!(json["repaired"][0], "enabled ttl on ttl");
    }
}
