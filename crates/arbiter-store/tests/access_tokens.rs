//! The access tokens' conformance suite: every scenario runs against SQLite (a temporary
//! file) and Postgres (a fresh database on the real server), through the same
//! `AccessTokens` port. A missing Postgres fails the Postgres half.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::both;

use std::sync::Arc;

use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::tokens::*;
use arbiter_store::workers::{Capabilities, Registration, WorkerRegistry};

const SECOND: i64 = 1_000_000;

fn t(s: i64) -> Timestamp {
    Timestamp(1_800_000_000 * SECOND + s * SECOND)
}

trait Both: AccessTokens + WorkerRegistry {}
impl<T: AccessTokens + WorkerRegistry> Both for T {}

/// A token is minted with its role, authenticates (recording its use), is listed without
/// its value, and dies when revoked; its name stays taken.
async fn create_authenticate_revoke(store: Arc<dyn Both>) {
    let reader = store.create_token("alice", Role::ReadOnly, t(0)).await.unwrap();
    assert!(reader.token.expose().starts_with(ACCESS_TOKEN_PREFIX));
    assert_eq!(reader.record.role, Role::ReadOnly);
    let admin = store.create_token("ops", Role::Admin, t(1)).await.unwrap();
    assert_ne!(reader.token, admin.token);

    let found = store.authenticate_token(reader.token.expose(), t(5)).await.unwrap().expect("it authenticates");
    assert_eq!((found.name.as_str(), found.role, found.last_used_at), ("alice", Role::ReadOnly, Some(t(5))));
    assert_eq!(store.authenticate_token(admin.token.expose(), t(6)).await.unwrap().unwrap().role, Role::Admin);
    assert!(store.authenticate_token("arbt_not-a-token", t(6)).await.unwrap().is_none());
    assert!(store.authenticate_token("", t(6)).await.unwrap().is_none());

    let listed = store.tokens().await.unwrap();
    assert_eq!(listed.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["alice", "ops"]);
    assert!(!format!("{listed:?}").contains(reader.token.expose()), "a listing never holds a value");

    match store.create_token("alice", Role::Admin, t(7)).await {
        Err(StoreError::TokenExists { name }) => assert_eq!(name, "alice"),
        other => panic!("a taken name must be refused, got {other:?}"),
    }
    // The refused creation changed nothing: alice still only reads.
    assert_eq!(store.authenticate_token(reader.token.expose(), t(8)).await.unwrap().unwrap().role, Role::ReadOnly);

    let revoked = store.revoke_token("alice", t(9)).await.unwrap();
    assert_eq!(revoked.revoked_at, Some(t(9)));
    assert!(store.authenticate_token(reader.token.expose(), t(10)).await.unwrap().is_none());
    assert_eq!(store.revoke_token("alice", t(11)).await.unwrap().revoked_at, Some(t(9)), "the first time stays");
    assert!(matches!(store.create_token("alice", Role::ReadOnly, t(12)).await, Err(StoreError::TokenExists { .. })));
    assert!(matches!(store.revoke_token("nobody", t(12)).await, Err(StoreError::NoToken { .. })));
    assert!(store.authenticate_token(admin.token.expose(), t(13)).await.unwrap().is_some(), "others live on");
}

/// Tokens of one kind never open the other: a worker token is no access token, and an
/// access token is no worker token; a hostile name is refused before the store.
async fn kinds_stay_apart(store: Arc<dyn Both>) {
    let registration = Registration {
        name: "w1".into(),
        capabilities: Capabilities { runners: vec!["command".into()], backends: vec![], slots: 1 },
        replace: false,
    };
    let worker = store.register(&registration, t(0)).await.unwrap();
    let access = store.create_token("alice", Role::Admin, t(0)).await.unwrap();
    assert!(store.authenticate_token(worker.token.expose(), t(1)).await.unwrap().is_none());
    assert!(store.authenticate(access.token.expose()).await.unwrap().is_none());
    for bad in ["", "a b", "<script>", "../x", &"x".repeat(65)] {
        assert!(matches!(store.create_token(bad, Role::ReadOnly, t(2)).await, Err(StoreError::InvalidToken { .. })));
    }
}

both!(create_authenticate_revoke, kinds_stay_apart);
