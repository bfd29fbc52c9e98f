//! [`Store`] for [`DynamoStore`]: one conditional PutItem per write,
//! consistent GetItem, a parallel consistent Scan, and one Query per shard of
//! the `changes`, `lease_ends` or `change_stamps` index. Items this binary
//! cannot read are skipped by the multi-item reads (logged and counted),
//! never fatal to them.

use super::errors::Target;
use super::item::{
    self, CHANGE_STAMP, CHANGE_STAMPS_INDEX, CHANGED_AT_MS, CHANGES_INDEX, Item, LEASE_ENDS_INDEX,
    LEASE_UNTIL_MS, SHARD, SHARDS,
};
use super::{CAPACITY, DynamoStore, condition, errors, record_request_metrics};
use crate::{ChangeStamp, LeaseEnd, PutOutcome, Store, StoreError};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
};
use mcs_core::rules::renewal_extends;
use mcs_core::{Record, WriteDecision, decide};
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinSet;
use tracing::warn;

fn units(capacity: Option<&ConsumedCapacity>) -> Option<f64> {
    capacity.and_then(ConsumedCapacity::capacity_units)
}

fn record_reads(op: &'static str, capacity: Option<&ConsumedCapacity>) {
    if let Some(u) = units(capacity) {
        crate::metrics::read_units(op, u);
    }
}

/// Records a write of `op` begun at `started` that succeeded, and the
/// capacity it consumed.
fn record_written(op: &'static str, started: Instant, capacity: Option<&ConsumedCapacity>) {
    record_request_metrics(op, started, "ok");
    if let Some(u) = units(capacity) {
        crate::metrics::write_units(op, u);
    }
}

/// Decodes an item of a multi-item read; what cannot be read is skipped.
fn readable(item: Item) -> Option<Record> {
    if item::is_meta(&item) {
        return None;
    }
    match item::decode(item) {
        Ok(record) => Some(record),
        Err(e) => {
            warn!(pk = e.pk(), reason = e.reason(), error = %e, "skipping an item this binary cannot read");
            crate::metrics::skipped(e.reason());
            None
        }
    }
}

/// Told the number of items of each page a scan reads, as it reads them
/// (progress of a long scan).
pub type PageObserver = Arc<dyn Fn(u64) + Send + Sync>;

impl DynamoStore {
    /// Every item of the table as stored, the schema item and items this
    /// binary cannot read included (for tools: mcs-admin): the parallel,
    /// consistent, paginated scan of [`Store::read_all`], each page's item
    /// count told to `on_page`.
    pub async fn scan_items(&self, on_page: Option<PageObserver>) -> Result<Vec<Item>, StoreError> {
        self.parallel_scan(Some, on_page).await
    }

    /// What `keep` keeps of every item of the table: a consistent,
    /// paginated scan in `scan_segments` parallel segments.
    async fn parallel_scan<T: Send + 'static>(
        &self,
        keep: fn(Item) -> Option<T>,
        on_page: Option<PageObserver>,
    ) -> Result<Vec<T>, StoreError> {
        let mut segments = JoinSet::new();
        for segment in 0..self.scan_segments {
            segments.spawn(scan_segment(
                self.client.clone(),
                self.target.clone(),
                (segment, self.scan_segments),
                keep,
                on_page.clone(),
            ));
        }
        collect(segments).await
    }

    /// Every item of `key` as stored, one per region that wrote it: a
    /// consistent Query of its partition for the sort keys of its origins
    /// (what [`Store::get`] merges).
    pub async fn items_of(&self, key: &mcs_core::Key) -> Result<Vec<Item>, StoreError> {
        const OP: &str = "get";
        let (pk, base) = item::key_base(key);
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let started = Instant::now();
            let out = self
                .client
                .query()
                .table_name(&self.target.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :base)")
                .expression_attribute_names("#pk", item::PK)
                .expression_attribute_names("#sk", item::SK)
                .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
                .expression_attribute_values(":base", AttributeValue::S(format!("{base}@")))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(CAPACITY)
                .send()
                .await;
            let out = out.map_err(|e| errors::failed(OP, &self.target, started, e))?;
            record_request_metrics(OP, started, "ok");
            record_reads(OP, out.consumed_capacity());
            items.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return Ok(items),
            }
        }
    }

    /// Deletes `stored` (an item as read, which stores `record`) if it is
    /// still exactly that item (the same generation, writer, write time and
    /// lease: `condition::for_delete`); says whether it did. For gc
    /// (mcs-admin), which collects what TTL would.
    pub async fn delete_if_unchanged(
        &self,
        record: &Record,
        stored: &Item,
    ) -> Result<bool, StoreError> {
        self.delete_on(stored, condition::for_delete(record)).await
    }

    /// Deletes the item of `stored`'s primary key if `condition` holds of
    /// it; says whether it did.
    async fn delete_on(
        &self,
        stored: &Item,
        condition: condition::Condition,
    ) -> Result<bool, StoreError> {
        let key: Item = [item::PK, item::SK]
            .into_iter()
            .filter_map(|name| stored.get(name).map(|v| (name.to_owned(), v.clone())))
            .collect();
        let request = self.client.delete_item().table_name(&self.target.table).set_key(Some(key));
        let result = condition::conditioned!(request, condition).send().await;
        match result {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(DeleteItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(errors::from_sdk("delete_item", &self.target, e)),
        }
    }

    /// Explains a refused write from the stored item: the rule that the
    /// condition expressed, applied to what the condition saw.
    async fn explain_refusal(
        &self,
        old: Option<Item>,
        new: &Record,
        now_ms: u64,
    ) -> Result<PutOutcome, StoreError> {
        let stored = match old {
            Some(old) => item::decode(old)?,
            // Emulators without ReturnValuesOnConditionCheckFailure: read it.
            None => match self.get(&new.key).await? {
                Some(stored) => stored,
                None => {
                    return Err(StoreError::Other(format!(
                        "write of {} refused but nothing is stored",
                        new.key
                    )));
                }
            },
        };
        match decide(Some(&stored), new, now_ms) {
            WriteDecision::Renew if !renewal_extends(&stored, new) => Ok(PutOutcome::Applied),
            WriteDecision::Stale { stored } => Ok(PutOutcome::Stale { stored }),
            WriteDecision::Owned { owner, until_ms } => Ok(PutOutcome::Owned { owner, until_ms }),
            // The condition and the rule disagree on what is stored: its
            // attributes do not match its payload (digest, deleted).
            WriteDecision::Apply | WriteDecision::Renew => Err(StoreError::Corrupt(format!(
                "write of {} at {} refused by the condition but allowed by the rule over {}: \
                 stored attributes disagree with the stored payload",
                new.key, new.version, stored.version
            ))),
        }
    }
}

/// What DynamoDB's TTL deletes, by the `ttl` attribute as stored: the
/// conformance suite's TTL case, and tests of two processes or regions on
/// one table (`mcs_testkit`). Test support only.
#[cfg(feature = "testsuite")]
#[async_trait]
impl crate::EmulatesTtl for DynamoStore {
    /// Every item whose `ttl` the time `now_ms` has reached, each deleted
    /// on condition that it still has (as TTL deletes only what is still
    /// expired); items without `ttl` (exports, `META`) are kept.
    async fn emulate_ttl(&self, now_ms: u64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for stored in self.scan_items(None).await? {
            if item::stored_ttl(&stored).is_some_and(|ttl| item::expired_by_ttl(ttl, now_ms))
                && self.delete_on(&stored, condition::for_expired(now_ms / 1000)).await?
            {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

#[async_trait]
impl Store for DynamoStore {
    async fn put(&self, record: &Record, now_ms: u64) -> Result<PutOutcome, StoreError> {
        const OP: &str = "put";
        super::check_record_size(record)?;
        let item = item::encode(record, &self.origin, self.retention_ms)?;
        let condition = condition::for_write(record, now_ms);
        let started = Instant::now();
        let request = self.client.put_item().table_name(&self.target.table).set_item(Some(item));
        let result = condition::conditioned!(request, condition)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await;
        match result {
            Ok(out) => {
                record_written(OP, started, out.consumed_capacity());
                Ok(PutOutcome::Applied)
            }
            Err(err) => {
                if let Some(PutItemError::ConditionalCheckFailedException(refused)) =
                    err.as_service_error()
                {
                    record_request_metrics(OP, started, "refused");
                    let old = refused.item().cloned();
                    return self.explain_refusal(old, record, now_ms).await;
                }
                Err(errors::failed(OP, &self.target, started, err))
            }
        }
    }

    /// One conditional UpdateItem of this region's item of `record` (the
    /// renewal branch of the write rule, `condition::for_renew`) that sets
    /// the lease end, its terms and the TTL as `put` would write them, and
    /// leaves `changed_at_ms` as stored (returned). Only on a table at
    /// schema 3 on (`renewals_keep_changed_at`); `None` without a request
    /// before, when the condition refuses, and when DynamoDB refuses the
    /// request itself (`Other`: not transient, e.g. a role without
    /// `UpdateItem`; logged, counted as `error`), so that the put the
    /// caller then makes keeps the lease.
    async fn renew(&self, record: &Record, _now_ms: u64) -> Result<Option<u64>, StoreError> {
        const OP: &str = "renew";
        if !self.renewals_keep_changed_at() {
            return Ok(None);
        }
        super::check_record_size(record)?;
        let Some(condition) = condition::for_renew(record) else {
            return Ok(None);
        };
        let (mut names, mut values) = (condition.names, condition.values);
        let (mut set, mut remove) = (Vec::new(), Vec::new());
        for (attribute, value) in item::lease_attributes(record, &self.origin, self.retention_ms)? {
            names.insert(format!("#{attribute}"), attribute.to_owned());
            match value {
                Some(value) => {
                    set.push(format!("#{attribute} = :new_{attribute}"));
                    values.insert(format!(":new_{attribute}"), value);
                }
                None => remove.push(format!("#{attribute}")),
            }
        }
        let mut update = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            update.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let started = Instant::now();
        let condition = condition::Condition { expression: condition.expression, names, values };
        let request = self
            .client
            .update_item()
            .table_name(&self.target.table)
            .set_key(Some(item::key_item(&record.key, &self.origin)))
            .update_expression(update);
        let result = condition::conditioned!(request, condition)
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await;
        match result {
            Ok(out) => {
                record_written(OP, started, out.consumed_capacity());
                let stored = out.attributes.unwrap_or_default();
                let changed_at = item::changed_at_of(&stored)
                    .map_err(|e| StoreError::Corrupt(format!("renewal of {}: {e}", record.key)))?;
                Ok(Some(changed_at))
            }
            Err(err) => {
                if let Some(UpdateItemError::ConditionalCheckFailedException(_)) =
                    err.as_service_error()
                {
                    record_request_metrics(OP, started, "refused");
                    return Ok(None);
                }
                match errors::failed(OP, &self.target, started, err) {
                    // Not transient (an UpdateItem the role may not make,
                    // say): the caller's put writes the renewal as before,
                    // which readers at any version learn from the feed.
                    StoreError::Other(error) => {
                        warn!(%error, "renewal in place failed; writing it with a put");
                        Ok(None)
                    }
                    error => Err(error),
                }
            }
        }
    }

    fn renewals_keep_changed_at(&self) -> bool {
        self.table_version() >= super::RENEWALS_KEEP_CHANGED_AT_FROM
    }

    fn reads_change_stamps(&self) -> bool {
        self.table_version() >= super::READS_CHANGE_STAMPS_FROM
    }

    /// Re-reads the META item: a table migrated meanwhile (to 3: renewals
    /// keep `changed_at_ms` from now on) takes effect; one moved beyond
    /// what this binary may use is an error, the version last read kept.
    async fn refresh_schema(&self) -> Result<(), StoreError> {
        self.ensure_schema().await.map(|_| ())
    }

    /// The winning record of `key` over the items of every origin (a
    /// consistent Query of its partition), merged by version as readers do.
    async fn get(&self, key: &mcs_core::Key) -> Result<Option<Record>, StoreError> {
        let mut winner: Option<Record> = None;
        for found in self.items_of(key).await? {
            // A single item this binary cannot read is an error, not
            // absence: absence would read as "nothing stored".
            let record = item::decode(found)?;
            if winner.as_ref().is_none_or(|w| record.supersedes(w)) {
                winner = Some(record);
            }
        }
        Ok(winner)
    }

    async fn read_all(&self) -> Result<Vec<Record>, StoreError> {
        self.parallel_scan(readable, None).await
    }

    async fn read_changed_since(&self, since_ms: u64) -> Result<Vec<Record>, StoreError> {
        let mut shards = JoinSet::new();
        for shard in 0..SHARDS {
            shards.spawn(query_changes(self.client.clone(), self.target.clone(), shard, since_ms));
        }
        collect(shards).await
    }

    /// One Query per shard of the `lease_ends` index (docs/design.md §3).
    async fn read_lease_ends(&self, from_ms: u64, to_ms: u64) -> Result<Vec<LeaseEnd>, StoreError> {
        self.read_range(&LEASE_ENDS, (u128::from(from_ms), u128::from(to_ms))).await
    }

    /// One Query per shard of the `change_stamps` index (docs/design.md §3).
    async fn read_change_stamps(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<ChangeStamp>, StoreError> {
        let range = (
            ChangeStamp::first_sort_value(from_ms),
            ChangeStamp::first_sort_value(to_ms) | 0xffff_ffff,
        );
        self.read_range(&CHANGE_STAMPS, range).await
    }
}

/// Gathers the results of parallel reads; the first failure fails the read
/// (dropping the set cancels the others).
async fn collect<T: 'static>(
    mut tasks: JoinSet<Result<Vec<T>, StoreError>>,
) -> Result<Vec<T>, StoreError> {
    let mut records = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let part = joined.map_err(|e| StoreError::Other(format!("read task failed: {e}")))??;
        records.extend(part);
    }
    Ok(records)
}

/// One segment of a parallel scan: what `keep` keeps of its items, each
/// page's item count told to `on_page`.
async fn scan_segment<T>(
    client: Client,
    target: Arc<Target>,
    (segment, total): (u32, u32),
    keep: fn(Item) -> Option<T>,
    on_page: Option<PageObserver>,
) -> Result<Vec<T>, StoreError> {
    const OP: &str = "scan";
    // Segment counts are checked to fit at construction.
    let (segment, total) =
        (i32::try_from(segment).unwrap_or(i32::MAX), i32::try_from(total).unwrap_or(i32::MAX));
    let mut pages = client
        .scan()
        .table_name(&target.table)
        .segment(segment)
        .total_segments(total)
        .consistent_read(true)
        .return_consumed_capacity(CAPACITY)
        .into_paginator()
        .send();
    let mut kept = Vec::new();
    loop {
        let started = Instant::now();
        let Some(page) = pages.next().await else {
            break;
        };
        let page = page.map_err(|e| errors::failed(OP, &target, started, e))?;
        record_request_metrics(OP, started, "ok");
        record_reads(OP, page.consumed_capacity());
        let items = page.items.unwrap_or_default();
        if let Some(on_page) = &on_page {
            on_page(items.len() as u64);
        }
        kept.extend(items.into_iter().filter_map(keep));
    }
    Ok(kept)
}

/// A read of one of the small indexes by a range of its sort key, one
/// Query per shard: `lease_ends` and `change_stamps` (docs/design.md §3).
struct RangeRead<T> {
    /// The operation, as metrics name it.
    op: &'static str,
    index: &'static str,
    /// The index's sort key.
    sort: &'static str,
    /// What an entry is, for the log.
    what: &'static str,
    decode: fn(&Item) -> Result<T, String>,
}

const LEASE_ENDS: RangeRead<LeaseEnd> = RangeRead {
    op: "query_lease_ends",
    index: LEASE_ENDS_INDEX,
    sort: LEASE_UNTIL_MS,
    what: "lease end",
    decode: item::decode_lease_end,
};

const CHANGE_STAMPS: RangeRead<ChangeStamp> = RangeRead {
    op: "query_change_stamps",
    index: CHANGE_STAMPS_INDEX,
    sort: CHANGE_STAMP,
    what: "change stamp",
    decode: item::decode_change_stamp,
};

impl DynamoStore {
    /// `read` over every shard, its sort key in `range` (inclusive).
    async fn read_range<T: Send + 'static>(
        &self,
        read: &'static RangeRead<T>,
        range: (u128, u128),
    ) -> Result<Vec<T>, StoreError> {
        let mut shards = JoinSet::new();
        for shard in 0..SHARDS {
            shards.spawn(query_range(self.client.clone(), self.target.clone(), read, shard, range));
        }
        collect(shards).await
    }
}

/// `read` of one shard, its sort key in `from..=to`; an entry this binary
/// cannot read is skipped and counted, as by `readable`.
async fn query_range<T>(
    client: Client,
    target: Arc<Target>,
    read: &'static RangeRead<T>,
    shard: u32,
    (from, to): (u128, u128),
) -> Result<Vec<T>, StoreError> {
    let query = client
        .query()
        .index_name(read.index)
        .key_condition_expression("#shard = :shard AND #sort BETWEEN :from AND :to")
        .expression_attribute_names("#shard", SHARD)
        .expression_attribute_names("#sort", read.sort)
        .expression_attribute_values(":shard", AttributeValue::N(shard.to_string()))
        .expression_attribute_values(":from", AttributeValue::N(from.to_string()))
        .expression_attribute_values(":to", AttributeValue::N(to.to_string()));
    let items = query_items(read.op, &target, query).await?;
    Ok(items
        .iter()
        .filter_map(|found| match (read.decode)(found) {
            Ok(entry) => Some(entry),
            Err(e) => {
                warn!(error = %e, "skipping a {} this binary cannot read", read.what);
                crate::metrics::skipped("undecodable");
                None
            }
        })
        .collect())
}

/// Every readable record of one shard changed after `since_ms`.
async fn query_changes(
    client: Client,
    target: Arc<Target>,
    shard: u32,
    since_ms: u64,
) -> Result<Vec<Record>, StoreError> {
    let query = client
        .query()
        .index_name(CHANGES_INDEX)
        .key_condition_expression("#shard = :shard AND #changed > :since")
        .expression_attribute_names("#shard", SHARD)
        .expression_attribute_names("#changed", CHANGED_AT_MS)
        .expression_attribute_values(":shard", AttributeValue::N(shard.to_string()))
        .expression_attribute_values(":since", AttributeValue::N(since_ms.to_string()));
    let items = query_items("query_changes", &target, query).await?;
    Ok(items.into_iter().filter_map(readable).collect())
}

/// Every item `query` returns on `target`'s table, page by page, each page
/// recorded as `op` (request metrics and read units).
async fn query_items(
    op: &'static str,
    target: &Target,
    query: QueryFluentBuilder,
) -> Result<Vec<item::Item>, StoreError> {
    let mut pages =
        query.table_name(&target.table).return_consumed_capacity(CAPACITY).into_paginator().send();
    let mut items = Vec::new();
    loop {
        let started = Instant::now();
        let Some(page) = pages.next().await else {
            break;
        };
        let page = page.map_err(|e| errors::failed(op, target, started, e))?;
        record_request_metrics(op, started, "ok");
        record_reads(op, page.consumed_capacity());
        items.extend(page.items.unwrap_or_default());
    }
    Ok(items)
}
