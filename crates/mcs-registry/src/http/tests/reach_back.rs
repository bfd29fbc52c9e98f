//! The delta poll's window read as change stamps (docs/design.md §6
//! "Reaching back for late changes"): a poll reads changes only from the
//! earliest write there the view has not seen, and none when it has seen
//! them all.

use super::faulty::registry_on_faulty;
use super::*;
use crate::clock::Clock;
use mcs_core::Record;
use std::sync::atomic::Ordering;

const LOOKBACK: u64 = 10_000;

#[tokio::test]
async fn a_poll_reads_changes_only_from_the_earliest_write_it_has_not_seen() {
    let (mut registry, clock, store) =
        registry_on_faulty(&["--refresh-interval-ms", "1000", "--lookback-ms", "10000"]);
    let served = |registry: &Registry| registry.state.view.read().pools().len();
    registry.reader.poll_once().await; // the first full read, at T0
    assert_eq!(store.reads(), 0);

    // Nothing written: the stamps show nothing new, and no changes are read.
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(store.reads(), 0);

    // A new write: changes are read from just before it, not from the
    // watermark less the lookback.
    let fresh = pool_written("fresh", clock.now_ms());
    store.put(&fresh, clock.now_ms()).await.unwrap();
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(store.last_since(), Some(fresh.changed_at_ms - 1));
    assert_eq!(served(&registry), 1);

    // A write stamped 300 ms before that poll's start reaches storage only
    // now (replication lag): the next poll reaches back to it, no further.
    let polled = clock.now_ms() - 1_000;
    let late = pool_written("late", polled - 300);
    store.put(&late, clock.now_ms()).await.unwrap();
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(store.last_since(), Some(polled - 301));
    assert_eq!(served(&registry), 2, "the late write is served");

    // Seen now, as is a write of the registry's own (the registrar applies
    // it to the view as it stores it): no read of changes.
    let reads = store.reads();
    let own = pool_written("own", clock.now_ms());
    store.put(&own, clock.now_ms()).await.unwrap();
    registry.state.view.apply(own);
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(store.reads(), reads);
    assert_eq!(served(&registry), 3);

    // Without stamps the poll reads the whole lookback, as before them.
    store.stamps_fail.store(true, Ordering::SeqCst);
    let watermark = clock.now_ms();
    let later = pool_written("later", watermark - 2_000);
    store.put(&later, clock.now_ms()).await.unwrap();
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(store.last_since(), Some(watermark - LOOKBACK));
    assert_eq!(served(&registry), 4);
}

/// Pool `name`, leased for a minute, its content written at `at_ms`.
fn pool_written(name: &str, at_ms: u64) -> Record {
    let mut record =
        mcs_core::fixtures::mk_pool(name, T0 << 16, "reg-b", None, Some(at_ms + 60_000));
    record.changed_at_ms = at_ms;
    record
}
