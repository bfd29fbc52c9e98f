//! Loading a table fast: BatchWriteItem of items already encoded (by the
//! store itself, captured by the meter), 25 to a request, several requests
//! in flight, unprocessed items sent again.

use super::meter::JsonItem;
use anyhow::{Context, bail};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use serde_json::Value;
use std::collections::HashMap;
use tokio::task::JoinSet;

/// An item of DynamoDB's JSON as the SDK carries it.
pub fn to_item(item: &JsonItem) -> anyhow::Result<HashMap<String, AttributeValue>> {
    item.iter().map(|(k, v)| Ok((k.clone(), to_attribute(v)?))).collect()
}

fn to_attribute(value: &Value) -> anyhow::Result<AttributeValue> {
    let (kind, inner) =
        value.as_object().and_then(|o| o.iter().next()).context("an attribute value")?;
    let text = || inner.as_str().map(str::to_owned).context("a string");
    let texts = || -> anyhow::Result<Vec<String>> {
        inner
            .as_array()
            .context("a set")?
            .iter()
            .map(|v| v.as_str().map(str::to_owned).context("a set element"))
            .collect()
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().context("a boolean")?),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .context("a list")?
                .iter()
                .map(to_attribute)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(
            inner
                .as_object()
                .context("a map")?
                .iter()
                .map(|(k, v)| Ok((k.clone(), to_attribute(v)?)))
                .collect::<anyhow::Result<_>>()?,
        ),
        other => bail!("attribute type {other} is not used by the store's items"),
    })
}

/// Writes `items` into `table`, `in_flight` batches at a time.
pub async fn batch_write(
    client: &Client,
    table: &str,
    items: Vec<JsonItem>,
    in_flight: usize,
) -> anyhow::Result<()> {
    let mut batches: Vec<Vec<WriteRequest>> = Vec::new();
    for chunk in items.chunks(25) {
        let mut batch = Vec::with_capacity(chunk.len());
        for item in chunk {
            let put = PutRequest::builder().set_item(Some(to_item(item)?)).build()?;
            batch.push(WriteRequest::builder().put_request(put).build());
        }
        batches.push(batch);
    }
    let mut tasks = JoinSet::new();
    for batch in batches {
        if tasks.len() >= in_flight.max(1)
            && let Some(done) = tasks.join_next().await
        {
            done??;
        }
        tasks.spawn(write_one(client.clone(), table.to_owned(), batch));
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

async fn write_one(client: Client, table: String, batch: Vec<WriteRequest>) -> anyhow::Result<()> {
    let mut pending = batch;
    for _ in 0..20 {
        let out = client
            .batch_write_item()
            .request_items(table.clone(), pending)
            .send()
            .await
            .context("BatchWriteItem")?;
        pending = out.unprocessed_items.and_then(|mut u| u.remove(&table)).unwrap_or_default();
        if pending.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    bail!("BatchWriteItem left {} items unprocessed after 20 attempts", pending.len())
}
