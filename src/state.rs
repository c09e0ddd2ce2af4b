//! What every request handler shares: the database once it is open, and whether the process is
//! shutting down.
//!
//! The listener is bound before the database opens (so `/-/healthy` answers during a long WAL
//! replay), which is why the database is a slot filled once rather than a plain field.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use storage::Db;

/// Shared by all handlers through `axum::extract::State<Arc<AppState>>`.
#[derive(Default)]
pub struct AppState {
    db: OnceLock<Arc<Db>>,
    stopping: AtomicBool,
}

impl AppState {
    /// A state whose database is still opening.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes the opened database to the handlers. Called once, when `Db::open` returns; a
    /// second call is ignored because the first database stays the one being served.
    pub fn set_db(&self, db: Arc<Db>) {
        if self.db.set(db).is_err() {
            tracing::warn!("database already set; ignoring a second one");
        }
    }

    /// The database, or `None` while it is still opening.
    pub fn db(&self) -> Option<&Arc<Db>> {
        self.db.get()
    }

    /// Marks the process as shutting down, so `/-/ready` tells load balancers to stop sending.
    pub fn begin_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// True once shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}
