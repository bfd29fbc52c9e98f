//! Registrations, exports and withdrawals: validated requests turned into
//! [`Intent`]s for the registrar.

use super::AppState;
use super::error::ApiError;
use super::extract::{Segments, ValidJson, ValidQuery};
use crate::authz::{Caller, Scope};
use crate::registrar::Intent;
use axum::Json;
use axum::extract::State;
use mcs_api::{
    ClusterRegistered, ClusterRegistration, Condition, ExportAccepted, ExportKey, ExportRequest,
    FieldError, Label, PoolId, PoolRegistered, PoolRegistration, RouterId, RouterRegistered,
    RouterRegistration, Withdrawal, Withdrawn,
};
use mcs_core::imports::unserved_export_conditions;
use mcs_core::{Body, Key};
use std::sync::Arc;

type AppResult<T> = Result<Json<T>, ApiError>;

fn label(field: &str, value: &str) -> Result<Label, ApiError> {
    Label::new(value).map_err(|e| ApiError::Invalid(FieldError::new(field, e)))
}

pub(super) async fn register_pool(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ValidJson(reg): ValidJson<PoolRegistration>,
) -> AppResult<PoolRegistered> {
    caller.allow(Scope::Cluster(reg.pool_key.cluster_id.as_str()))?;
    let pool = reg.to_pool();
    let pool_id = pool.pool_id.clone();
    let record = state
        .registrar
        .write(Intent {
            key: Key::Pool { pool_id: pool_id.clone() },
            body: Body::Pool(pool),
            incarnation: reg.incarnation,
            generation: reg.generation,
            leased: true,
            lease: reg.lease,
        })
        .await?;
    Ok(Json(PoolRegistered {
        pool_id,
        generation: record.version.generation,
        lease: state.registrar.grant(reg.lease).lease(),
    }))
}

pub(super) async fn register_router(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ValidJson(reg): ValidJson<RouterRegistration>,
) -> AppResult<RouterRegistered> {
    caller.allow(Scope::Routers)?;
    let router_id = reg.router_id.clone();
    let record = state
        .registrar
        .write(Intent {
            key: Key::Router { router_id: router_id.clone() },
            body: Body::Router(reg.to_replica()),
            incarnation: reg.incarnation,
            generation: reg.generation,
            leased: true,
            lease: reg.lease,
        })
        .await?;
    Ok(Json(RouterRegistered {
        router_id,
        generation: record.version.generation,
        lease: state.registrar.grant(reg.lease).lease(),
    }))
}

pub(super) async fn register_cluster(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments(cluster_id): Segments<String>,
    ValidJson(reg): ValidJson<ClusterRegistration>,
) -> AppResult<ClusterRegistered> {
    caller.allow(Scope::Cluster(&cluster_id))?;
    let cluster_id = label("cluster_id", &cluster_id)?;
    reg.check_path(&cluster_id)?;
    let key = Key::Cluster { cluster_id };
    let held = state.registrar.lookup(&key).await?;
    let renewed = mcs_core::rules::continues_registration(held.as_ref(), reg.incarnation.as_str());
    let record = state
        .registrar
        .write(Intent {
            key,
            body: Body::Cluster,
            incarnation: Some(reg.incarnation),
            generation: reg.generation,
            leased: true,
            lease: reg.lease,
        })
        .await?;
    Ok(Json(ClusterRegistered {
        generation: record.version.generation,
        lease: state.registrar.grant(reg.lease).lease(),
        renewed,
    }))
}

fn export_key(cluster_id: &str, namespace: &str, name: &str) -> Result<ExportKey, ApiError> {
    Ok(ExportKey {
        cluster_id: label("cluster_id", cluster_id)?,
        namespace: label("namespace", namespace)?,
        name: label("name", name)?,
    })
}

pub(super) async fn put_export(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments((cluster_id, namespace, name)): Segments<(String, String, String)>,
    ValidJson(req): ValidJson<ExportRequest>,
) -> AppResult<ExportAccepted> {
    caller.allow(Scope::Cluster(&cluster_id))?;
    let key = export_key(&cluster_id, &namespace, &name)?;
    let record = state
        .registrar
        .write(Intent {
            key: Key::Export(key.clone()),
            body: Body::Export(req.spec()),
            incarnation: req.incarnation,
            generation: req.generation,
            leased: false,
            lease: None,
        })
        .await?;
    let conditions = state
        .view
        .read()
        .export_conditions(&key)
        .map(<[Condition]>::to_vec)
        .unwrap_or_else(|| unserved_export_conditions(&key.cluster_id));
    Ok(Json(ExportAccepted { generation: record.version.generation, conditions }))
}

async fn withdraw(state: &AppState, key: Key, query: Withdrawal) -> AppResult<Withdrawn> {
    let record = state.registrar.withdraw(key, query.incarnation, query.generation).await?;
    Ok(Json(Withdrawn { generation: record.version.generation }))
}

pub(super) async fn withdraw_pool(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments(pool_id): Segments<String>,
    ValidQuery(query): ValidQuery<Withdrawal>,
) -> AppResult<Withdrawn> {
    let pool_id =
        PoolId::parse(&pool_id).map_err(|e| ApiError::Invalid(FieldError::new("pool_id", e)))?;
    let key = Key::Pool { pool_id };
    if caller.is_restricted() {
        // The pool's cluster is in the stored record. A pool id is a hash of
        // its key, cluster included, so every record of this id names the
        // same cluster: the check cannot race a later write.
        match state.registrar.lookup(&key).await?.map(|record| record.body) {
            Some(Body::Pool(pool)) => {
                caller.allow(Scope::Cluster(pool.pool_key.cluster_id.as_str()))?
            }
            // Unknown or withdrawn: what the withdrawal itself would answer.
            _ => return Err(ApiError::Write(crate::registrar::WriteError::NotFound(key))),
        }
    }
    withdraw(&state, key, query).await
}

pub(super) async fn withdraw_router(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments(router_id): Segments<String>,
    ValidQuery(query): ValidQuery<Withdrawal>,
) -> AppResult<Withdrawn> {
    caller.allow(Scope::Routers)?;
    let router_id =
        RouterId::new(router_id).map_err(|e| ApiError::Invalid(FieldError::new("router_id", e)))?;
    withdraw(&state, Key::Router { router_id }, query).await
}

pub(super) async fn withdraw_cluster(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments(cluster_id): Segments<String>,
    ValidQuery(query): ValidQuery<Withdrawal>,
) -> AppResult<Withdrawn> {
    caller.allow(Scope::Cluster(&cluster_id))?;
    let cluster_id = label("cluster_id", &cluster_id)?;
    withdraw(&state, Key::Cluster { cluster_id }, query).await
}

pub(super) async fn withdraw_export(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Segments((cluster_id, namespace, name)): Segments<(String, String, String)>,
    ValidQuery(query): ValidQuery<Withdrawal>,
) -> AppResult<Withdrawn> {
    caller.allow(Scope::Cluster(&cluster_id))?;
    let key = export_key(&cluster_id, &namespace, &name)?;
    withdraw(&state, Key::Export(key), query).await
}
