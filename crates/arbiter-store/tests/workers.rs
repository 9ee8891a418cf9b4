//! The worker registry's conformance suite: every scenario runs against SQLite (a temporary
//! file) and Postgres (a fresh database on the real server), through the same
//! `WorkerRegistry` port. A missing Postgres fails the Postgres half.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::both;

use std::sync::Arc;

use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::workers::*;
use serde_json::json;

const SECOND: i64 = 1_000_000;

fn t(s: i64) -> Timestamp {
    Timestamp(1_800_000_000 * SECOND + s * SECOND)
}

fn registration(name: &str, replace: bool) -> Registration {
    Registration {
        name: name.into(),
        capabilities: Capabilities { runners: vec!["command".into()], backends: vec!["local".into()], slots: 2 },
        replace,
    }
}

/// Registering mints an id and a token that authenticates; the token is stored only as its
/// hash; a taken name is refused unless re-registering is explicit, which keeps the id and
/// kills the old token.
async fn register_and_authenticate(reg: Arc<dyn WorkerRegistry>) {
    let a = reg.register(&registration("alpha", false), t(0)).await.unwrap();
    assert!(a.worker.id.starts_with("w-"), "{}", a.worker.id);
    assert_eq!(a.worker.name, "alpha");
    assert_eq!(a.worker.capabilities.slots, 2);
    assert_eq!(a.worker.registered_at, t(0));
    assert_eq!(a.worker.last_seen_at, None);
    assert!(!a.replaced);
    assert!(a.token.expose().starts_with(TOKEN_PREFIX));

    let found = reg.authenticate(a.token.expose()).await.unwrap().expect("the token authenticates");
    assert_eq!(found.id, a.worker.id);
    assert!(reg.authenticate("arbw_not-a-token").await.unwrap().is_none());
    assert!(reg.authenticate("").await.unwrap().is_none());

    let b = reg.register(&registration("beta", false), t(1)).await.unwrap();
    assert_ne!(a.worker.id, b.worker.id);
    assert_ne!(a.token, b.token);
    assert_eq!(reg.authenticate(b.token.expose()).await.unwrap().unwrap().name, "beta");

    match reg.register(&registration("alpha", false), t(2)).await {
        Err(StoreError::WorkerExists { name }) => assert_eq!(name, "alpha"),
        other => panic!("a taken name must be refused, got {other:?}"),
    }
    // The refused registration changed nothing.
    assert!(reg.authenticate(a.token.expose()).await.unwrap().is_some());

    let mut again = registration("alpha", true);
    again.capabilities.runners = vec!["claude-code".into()];
    let a2 = reg.register(&again, t(3)).await.unwrap();
    assert!(a2.replaced);
    assert_eq!(a2.worker.id, a.worker.id, "re-registering keeps the id");
    assert_eq!(a2.worker.capabilities.runners, vec!["claude-code".to_string()]);
    assert!(reg.authenticate(a.token.expose()).await.unwrap().is_none(), "the old token is dead");
    assert_eq!(reg.authenticate(a2.token.expose()).await.unwrap().unwrap().id, a.worker.id);

    match reg.register(&registration("bad name", false), t(4)).await {
        Err(StoreError::InvalidWorker { reason }) => assert!(reason.contains("bad name"), "{reason}"),
        other => panic!("an invalid name must be refused, got {other:?}"),
    }

    let names: Vec<String> = reg.workers().await.unwrap().into_iter().map(|w| w.name).collect();
    assert_eq!(names, ["alpha", "beta"]);
}

/// Revoking kills the token at once (authenticate finds nothing, touch does nothing);
/// rotating mints a new token, kills the old one and brings a revoked worker back.
async fn revoke_and_rotate(reg: Arc<dyn WorkerRegistry>) {
    let a = reg.register(&registration("alpha", false), t(0)).await.unwrap();
    let b = reg.register(&registration("beta", false), t(0)).await.unwrap();

    let revoked = reg.revoke("alpha", "admin", t(5)).await.unwrap();
    assert_eq!(revoked.revoked_at, Some(t(5)));
    assert_eq!(revoked.revoked_by.as_deref(), Some("admin"), "a revocation names who did it");
    assert!(reg.authenticate(a.token.expose()).await.unwrap().is_none());
    assert!(!reg.touch(&a.worker.id, None, &json!(null), t(6)).await.unwrap());
    // Revoking again keeps the first time.
    let again = reg.revoke("alpha", "token:bob", t(7)).await.unwrap();
    assert_eq!((again.revoked_at, again.revoked_by.as_deref()), (Some(t(5)), Some("admin")));
    // The other worker is untouched.
    assert!(reg.authenticate(b.token.expose()).await.unwrap().is_some());

    let rotated = reg.rotate("alpha", t(8)).await.unwrap();
    assert_ne!(rotated.token, a.token);
    assert_eq!((rotated.worker.revoked_at, rotated.worker.revoked_by.as_deref()), (None, None));
    assert!(reg.authenticate(a.token.expose()).await.unwrap().is_none());
    assert_eq!(reg.authenticate(rotated.token.expose()).await.unwrap().unwrap().id, a.worker.id);

    let rotated_b = reg.rotate("beta", t(9)).await.unwrap();
    assert!(reg.authenticate(b.token.expose()).await.unwrap().is_none(), "rotation kills the old token");
    assert!(reg.authenticate(rotated_b.token.expose()).await.unwrap().is_some());

    assert!(matches!(reg.revoke("nobody", "admin", t(9)).await, Err(StoreError::NoWorker { .. })));
    assert!(matches!(reg.rotate("nobody", t(9)).await, Err(StoreError::NoWorker { .. })));
    assert!(reg.worker("nobody").await.unwrap().is_none());
}

/// A heartbeat records when the worker was seen, what it holds and (when given) its new
/// capabilities.
async fn touch(reg: Arc<dyn WorkerRegistry>) {
    let a = reg.register(&registration("alpha", false), t(0)).await.unwrap();
    let work = json!([{"plan": "p", "task": "T1", "fence": 3}]);
    assert!(reg.touch(&a.worker.id, None, &work, t(10)).await.unwrap());
    let w = reg.worker("alpha").await.unwrap().unwrap();
    assert_eq!(w.last_seen_at, Some(t(10)));
    assert_eq!(w.current_work, work);
    assert_eq!(w.capabilities.slots, 2, "capabilities stay when none are given");
    assert!(w.seen_since(t(9)) && !w.seen_since(t(11)));

    let caps = Capabilities { runners: vec!["codex".into()], backends: vec![], slots: 5 };
    assert!(reg.touch(&a.worker.id, Some(&caps), &json!(null), t(11)).await.unwrap());
    let w = reg.worker("alpha").await.unwrap().unwrap();
    assert_eq!(w.capabilities, caps);
    assert_eq!(w.current_work, json!(null));
    assert!(!reg.touch("w-unknown", None, &json!(null), t(12)).await.unwrap());
    reg.ping().await.unwrap();
}

/// Many registrations of one name at once: exactly one wins.
async fn concurrent_registrations(reg: Arc<dyn WorkerRegistry>) {
    let mut handles = Vec::new();
    for _ in 0..16 {
        let reg = reg.clone();
        handles.push(tokio::spawn(async move { reg.register(&registration("same", false), t(0)).await }));
    }
    let mut won = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::WorkerExists { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
}

both!(register_and_authenticate, revoke_and_rotate, touch, concurrent_registrations);
