//! The tailers: each region's stream read from TRIM_HORIZON, and its own
//! items' images routed to the links out of the region.

use super::*;

/// One shard's reading position.
#[derive(Debug)]
pub(super) struct ShardCursor {
    iterator: Option<String>,
}

/// A region's stream, opened at TRIM_HORIZON on every shard.
#[derive(Debug)]
pub(super) struct OpenStream {
    client: aws_sdk_dynamodbstreams::Client,
    region: String,
    shards: Vec<ShardCursor>,
}

pub(super) async fn open_stream(endpoint: &str, table: &str, region: &str) -> OpenStream {
    let described = dynamodb_client(endpoint, region)
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap_or_else(|e| panic!("describe table {table} in {region}: {e:?}"));
    let arn = described
        .table()
        .and_then(|t| t.latest_stream_arn())
        .unwrap_or_else(|| panic!("table {table} in {region} has no stream"))
        .to_owned();
    let client = streams_client(endpoint, region);
    let stream = client
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("describe stream {arn}: {e:?}"));
    let mut shards = Vec::new();
    for shard in stream.stream_description().map(|d| d.shards()).unwrap_or_default() {
        let shard_id = shard.shard_id().unwrap_or_default();
        let iterator = client
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard_id)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap_or_else(|e| panic!("shard iterator of {shard_id} in {region}: {e:?}"));
        shards.push(ShardCursor { iterator: iterator.shard_iterator });
    }
    assert!(!shards.is_empty(), "the stream of {table} in {region} has no shard");
    OpenStream { client, region: region.to_owned(), shards }
}

/// Reads `stream` for ever, handing its region's own images to the links
/// out of it.
pub(super) async fn tail(shared: Arc<Shared>, region: String, mut stream: OpenStream) {
    let (shortest, longest) = POLL_INTERVAL;
    let mut wait = shortest;
    loop {
        let mut found = 0usize;
        for shard in &mut stream.shards {
            let Some(iterator) = shard.iterator.clone() else { continue };
            let out = match stream.client.get_records().shard_iterator(iterator).send().await {
                Ok(out) => out,
                Err(e) => {
                    eprintln!("replicator: get_records in {}: {e:?}", stream.region);
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
            };
            // A closed shard (never on moto) has no next iterator.
            shard.iterator = out.next_shard_iterator;
            let records = out.records.unwrap_or_default();
            found += records.len();
            for record in records {
                route(&shared, &region, record);
            }
        }
        if found == 0 {
            shared.empty_rounds[&region].fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(longest);
        } else if found < 1_000 {
            wait = shortest;
            tokio::time::sleep(wait).await;
        }
    }
}

/// Sends one stream record of `region` on, or counts why not.
pub(super) fn route(shared: &Shared, region: &str, record: aws_sdk_dynamodbstreams::types::Record) {
    let c = &shared.counters;
    match record.event_name {
        Some(OperationType::Insert | OperationType::Modify) => {}
        Some(OperationType::Remove) => {
            c.removes.fetch_add(1, Ordering::SeqCst);
            return;
        }
        other => panic!("unexpected stream event {other:?}"),
    }
    let image = record.dynamodb.and_then(|d| d.new_image).expect("INSERT/MODIFY has a new image");
    let item: raw::Item = image.into_iter().map(|(k, v)| (k, convert(v))).collect();
    match raw::origin_of(&item) {
        // Items replicated into this region: sending them on would loop.
        Some(origin) if origin != region => {
            c.foreign.fetch_add(1, Ordering::SeqCst);
            return;
        }
        Some(_) => {}
        // The schema item: each region migrates its own.
        None => return,
    }
    c.read.fetch_add(1, Ordering::SeqCst);
    let now = Instant::now();
    for link in shared.links.iter().filter(|l| l.from == region) {
        let seq = shared.sequence.fetch_add(1, Ordering::SeqCst);
        shared.pending.fetch_add(1, Ordering::SeqCst);
        let mut state = link.lock();
        let extra = state.faults.jitter;
        let due = now + state.faults.delay + state.rng.up_to(extra);
        state.queue.insert((due, seq), Delivery { item: item.clone(), losses: 0 });
        drop(state);
        link.wake.notify_one();
    }
}

/// A stream image's value as the DynamoDB API takes it.
pub(super) fn convert(value: StreamValue) -> AttributeValue {
    match value {
        StreamValue::S(s) => AttributeValue::S(s),
        StreamValue::N(n) => AttributeValue::N(n),
        StreamValue::B(b) => AttributeValue::B(b),
        StreamValue::Bool(b) => AttributeValue::Bool(b),
        StreamValue::Null(b) => AttributeValue::Null(b),
        StreamValue::Ss(v) => AttributeValue::Ss(v),
        StreamValue::Ns(v) => AttributeValue::Ns(v),
        StreamValue::Bs(v) => AttributeValue::Bs(v),
        StreamValue::L(v) => AttributeValue::L(v.into_iter().map(convert).collect()),
        StreamValue::M(m) => {
            AttributeValue::M(m.into_iter().map(|(k, v)| (k, convert(v))).collect())
        }
        other => panic!("unknown attribute value in a stream image: {other:?}"),
    }
}
