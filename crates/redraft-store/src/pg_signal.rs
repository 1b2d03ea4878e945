//! Runs queued elsewhere, told at once: whoever queues a run (an API node, a process putting a
//! run back) sends a notification on the schema's channel ([`channel`]) once the run is
//! committed, and each worker
//! listening wakes its claim loop, instead of finding the run at its next poll of the queue (up
//! to `[queue] poll` later). Notifications are a hint: one lost (the listening connection was
//! down) costs only that wait, since workers still poll.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Notify, oneshot};

/// The channel runs queued in `schema` are announced on: one per schema, so that the stores of
/// two schemas in one database do not wake each other's workers. At most 63 bytes (longer
/// channel names are refused).
pub(crate) fn channel(schema: &str) -> String {
    let mut name = format!("redraft_queue:{schema}");
    let mut end = name.len().min(63);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

/// Wait after the listening connection fails before connecting again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Told when runs were queued; listens from the first wait on.
#[derive(Debug)]
pub(crate) struct QueueSignal {
    pool: PgPool,
    channel: String,
    queued: Notify,
    /// Dropped with the signal: the listening task ends then.
    stop: Mutex<Option<oneshot::Receiver<()>>>,
    _alive: oneshot::Sender<()>,
}

impl QueueSignal {
    pub(crate) fn new(pool: PgPool, channel: String) -> Arc<Self> {
        let (alive, stop) = oneshot::channel();
        Arc::new(Self { pool, channel, queued: Notify::new(), stop: Mutex::new(Some(stop)), _alive: alive })
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// Completes when runs may have been queued since the last call.
    pub(crate) async fn queued(self: &Arc<Self>) {
        let start = self.stop.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(stop) = start {
            tokio::spawn(listen(Arc::downgrade(self), self.pool.clone(), self.channel.clone(), stop));
        }
        self.queued.notified().await;
    }
}

/// Tell the listening workers that runs were queued (after the commit that stored them). A
/// notification that cannot be sent is only a later claim.
pub(crate) async fn announce(pool: &PgPool, channel: &str) {
    if let Err(e) = sqlx::query("SELECT pg_notify($1, '')").bind(channel).execute(pool).await {
        tracing::debug!("cannot announce queued runs: {e}");
    }
}

async fn listen(signal: Weak<QueueSignal>, pool: PgPool, channel: String, mut stop: oneshot::Receiver<()>) {
    let wake = || signal.upgrade().map(|s| s.queued.notify_one()).is_some();
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(&channel).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            _ = &mut stop => return,
            connected = connected => match connected {
                Ok(listener) => listener,
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => {
                    tracing::debug!("cannot listen for queued runs: {e}");
                    tokio::select! {
                        _ = &mut stop => return,
                        () = tokio::time::sleep(RECONNECT_AFTER) => continue,
                    }
                }
            },
        };
        // What was queued while nobody listened is claimed now.
        if !wake() {
            return;
        }
        loop {
            let received = tokio::select! {
                _ = &mut stop => return,
                received = listener.try_recv() => received,
            };
            match received {
                // A notification, or the connection lost (reconnected on the next call): claim.
                Ok(_) => {
                    if !wake() {
                        return;
                    }
                }
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => {
                    tracing::debug!("stopped listening for queued runs: {e}");
                    break;
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(RECONNECT_AFTER) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_channel_is_named_after_its_schema_within_63_bytes() {
        assert_eq!(super::channel("public"), "redraft_queue:public");
        let long = super::channel(&"é".repeat(40));
        assert!(long.len() <= 63 && long.starts_with("redraft_queue:é"), "{long}");
    }
}
