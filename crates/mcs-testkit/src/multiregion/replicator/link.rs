//! The links: deliveries applied to the target region's table as they
//! fall due (delay, jitter, loss, holds, partitions), each a PutItem that
//! never overwrites a newer copy.

use super::*;

/// Applies the deliveries of `link` to `target` as they fall due, unless
/// the link is held or cut.
pub(super) async fn deliver(
    shared: Arc<Shared>,
    link: Arc<Link>,
    target: aws_sdk_dynamodb::Client,
) {
    loop {
        let (mut batch, wait) = {
            let mut state = link.lock();
            let now = Instant::now();
            if state.faults.held || shared.cut(&link.from, &link.to) || state.queue.is_empty() {
                (Vec::new(), None)
            } else {
                let later = state.queue.split_off(&(now, u64::MAX));
                let due = std::mem::replace(&mut state.queue, later);
                let wait = state.queue.keys().next().map(|(t, _)| *t);
                (due.into_iter().collect::<Vec<_>>(), wait)
            }
        };
        if batch.is_empty() {
            match wait {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = link.wake.notified() => {}
                    }
                }
                None => link.wake.notified().await,
            }
            continue;
        }
        let (loss, redeliver_after) = {
            let mut state = link.lock();
            if state.faults.shuffle {
                state.rng.shuffle(&mut batch);
            }
            (state.faults.loss, state.faults.redeliver_after)
        };
        let mut in_flight = JoinSet::new();
        for ((_, seq), mut delivery) in batch {
            let lost = loss > 0.0 && delivery.losses < MAX_LOSSES && link.lock().rng.unit() < loss;
            if lost {
                shared.counters.lost.fetch_add(1, Ordering::SeqCst);
                delivery.losses += 1;
                link.lock().queue.insert((Instant::now() + redeliver_after, seq), delivery);
                continue;
            }
            while in_flight.len() >= MAX_IN_FLIGHT {
                if let Some(done) = in_flight.join_next().await {
                    settle(&shared, &link, done.expect("a delivery does not panic"));
                }
            }
            let (target, table) = (target.clone(), shared.table.clone());
            in_flight.spawn(async move {
                let outcome = put_if_newer(&target, &table, &delivery.item).await;
                (seq, delivery, outcome)
            });
        }
        while let Some(done) = in_flight.join_next().await {
            settle(&shared, &link, done.expect("a delivery does not panic"));
        }
    }
}

/// Counts a finished delivery, or queues it again when it failed.
pub(super) fn settle(
    shared: &Shared,
    link: &Link,
    (seq, delivery, outcome): (u64, Delivery, Result<bool, String>),
) {
    match outcome {
        Ok(applied) => {
            let c = &shared.counters;
            let counter = if applied { &c.applied } else { &c.superseded };
            counter.fetch_add(1, Ordering::SeqCst);
            shared.pending.fetch_sub(1, Ordering::SeqCst);
        }
        Err(e) => {
            eprintln!("replicator: put into {}: {e}", link.to);
            shared.counters.errors.fetch_add(1, Ordering::SeqCst);
            link.lock().queue.insert((Instant::now() + RETRY_AFTER, seq), delivery);
        }
    }
}

/// Writes `item` unless the target holds a copy at least as new in the
/// order of `Record::supersedes`: `(gen, writer)`, then lease end, then
/// `changed_at_ms`. One region writes each item and its conditional writes
/// only move forward in that order, so this is the item's commit order —
/// what DynamoDB's replication preserves for an item one region writes.
/// (Ordering by `changed_at_ms` first is not: two registrars of one region
/// with skewed clocks write the same item; mcs-sim found a replica going
/// back to an older generation that way.)
pub(super) async fn put_if_newer(
    target: &aws_sdk_dynamodb::Client,
    table: &str,
    item: &raw::Item,
) -> Result<bool, String> {
    let attr = |name: &str| item.get(name).cloned().ok_or_else(|| format!("item lacks {name}"));
    let lease = item.get(raw::LEASE_UNTIL_MS).cloned();
    let same_version_later = if lease.is_some() {
        "(attribute_not_exists(#l) OR #l < :l OR (#l = :l AND #c < :c))"
    } else {
        "(attribute_not_exists(#l) AND #c < :c)"
    };
    let mut put = target
        .put_item()
        .table_name(table)
        .set_item(Some(item.clone()))
        .condition_expression(format!(
            "attribute_not_exists(#pk) OR #g < :g OR (#g = :g AND \
             (#w < :w OR (#w = :w AND {same_version_later})))"
        ))
        .expression_attribute_names("#pk", raw::PK)
        .expression_attribute_names("#c", raw::CHANGED_AT_MS)
        .expression_attribute_names("#g", raw::GEN)
        .expression_attribute_names("#w", raw::WRITER)
        .expression_attribute_names("#l", raw::LEASE_UNTIL_MS)
        .expression_attribute_values(":c", attr(raw::CHANGED_AT_MS)?)
        .expression_attribute_values(":g", attr(raw::GEN)?)
        .expression_attribute_values(":w", attr(raw::WRITER)?);
    if let Some(lease) = lease {
        put = put.expression_attribute_values(":l", lease);
    }
    let result = put.send().await;
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.as_service_error(),
                Some(PutItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(format!("{e:?}")),
    }
}
