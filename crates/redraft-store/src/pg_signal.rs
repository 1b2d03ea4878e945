//! Runs queued or finished elsewhere, told at once. Whoever queues a run (an API node, a
//! process putting a run back) sends a notification on the schema's queue channel
//! ([`channel`]) once the run is committed, and each worker listening wakes its claim loop,
//! instead of finding the run at its next poll of the queue (up to `[queue] poll` later).
//! Whoever finishes runs sends their ids on the schema's finish channel ([`finish_channel`])
//! once the results are committed, and an API node waiting for those runs (`serve
//! --no-worker`) reads their results at once, instead of at its next poll of the runs it awaits.
//! Notifications are a hint: one lost (the listening connection was down) costs only that
//! wait, since both still poll.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Notify, oneshot};

/// The channel runs queued in `schema` are announced on: one per schema, so that the stores of
/// two schemas in one database do not wake each other's workers. At most 63 bytes (longer
/// channel names are refused).
pub(crate) fn channel(schema: &str) -> String {
    named("redraft_queue", schema)
}

/// The channel runs finished in `schema` are announced on (at most 63 bytes).
pub(crate) fn finish_channel(schema: &str) -> String {
    named("redraft_done", schema)
}

fn named(prefix: &str, schema: &str) -> String {
    let mut name = format!("{prefix}:{schema}");
    let mut end = name.len().min(63);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

/// The most bytes of run ids in one notification (the database's limit is 8,000).
const MAX_PAYLOAD: usize = 7_000;
/// The most announced run ids kept for a slow reader; past it, they are dropped and the reader
/// is told that runs were missed.
const MAX_KEPT: usize = 65_536;

/// Wait after the listening connection fails before connecting again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Told when runs were queued, or which runs finished; listens from the first wait on.
#[derive(Debug)]
pub(crate) struct Signal {
    pool: PgPool,
    channel: String,
    told: Notify,
    /// The runs announced finished and not yet taken (a finish channel only).
    announced: Option<Mutex<Announced>>,
    /// Dropped with the signal: the listening task ends then.
    stop: Mutex<Option<oneshot::Receiver<()>>>,
    _alive: oneshot::Sender<()>,
}

/// Runs announced finished, since the last take.
#[derive(Debug, Default)]
struct Announced {
    ids: Vec<String>,
    /// Some may have finished unannounced (not listening then, or too many kept): read them all.
    missed: bool,
}

impl Signal {
    /// Told when runs are queued on `channel`.
    pub(crate) fn queue(pool: PgPool, channel: String) -> Arc<Self> {
        Self::new(pool, channel, None)
    }

    /// Told which runs finished, on `channel`.
    pub(crate) fn finish(pool: PgPool, channel: String) -> Arc<Self> {
        Self::new(pool, channel, Some(Mutex::new(Announced::default())))
    }

    fn new(pool: PgPool, channel: String, announced: Option<Mutex<Announced>>) -> Arc<Self> {
        let (alive, stop) = oneshot::channel();
        Arc::new(Self { pool, channel, told: Notify::new(), announced, stop: Mutex::new(Some(stop)), _alive: alive })
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    fn listening(self: &Arc<Self>) {
        let start = self.stop.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(stop) = start {
            tokio::spawn(listen(Arc::downgrade(self), self.pool.clone(), self.channel.clone(), stop));
        }
    }

    /// Completes when runs may have been queued since the last call.
    pub(crate) async fn queued(self: &Arc<Self>) {
        self.listening();
        self.told.notified().await;
    }

    /// Completes with the runs announced finished since the last call, or `None` when some may
    /// have finished unannounced. Cancel-safe: nothing is taken until it completes.
    pub(crate) async fn finished(self: &Arc<Self>) -> Option<Vec<String>> {
        let Some(announced) = &self.announced else {
            return std::future::pending().await;
        };
        self.listening();
        loop {
            {
                let mut announced = announced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if announced.missed {
                    *announced = Announced::default();
                    return None;
                }
                if !announced.ids.is_empty() {
                    return Some(std::mem::take(&mut announced.ids));
                }
            }
            self.told.notified().await;
        }
    }

    /// What the listening task heard: a notification's payload, or `None` when it (re)connected.
    fn heard(&self, payload: Option<&str>) {
        if let Some(announced) = &self.announced {
            let mut announced = announced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match payload.map(serde_json::from_str::<Vec<String>>) {
                Some(Ok(ids)) if !ids.is_empty() && announced.ids.len() + ids.len() <= MAX_KEPT => {
                    announced.ids.extend(ids);
                }
                _ => {
                    announced.ids = Vec::new();
                    announced.missed = true;
                }
            }
        }
        self.told.notify_one();
    }
}

/// Tell the listening workers that runs were queued (after the commit that stored them). A
/// notification that cannot be sent is only a later claim.
pub(crate) async fn announce(pool: &PgPool, channel: &str) {
    if let Err(e) = sqlx::query("SELECT pg_notify($1, '')").bind(channel).execute(pool).await {
        tracing::debug!("cannot announce queued runs: {e}");
    }
}

/// Tell the listening API nodes that `run_ids` finished (after the commit that wrote them), in
/// as few notifications as fit. A notification that cannot be sent is only a later answer.
pub(crate) async fn announce_finished(pool: &PgPool, channel: &str, run_ids: &[String]) {
    let payloads = payloads(run_ids);
    if payloads.is_empty() {
        return;
    }
    if let Err(e) = sqlx::query("SELECT pg_notify($1, p) FROM UNNEST($2::TEXT[]) AS p")
        .bind(channel)
        .bind(payloads)
        .execute(pool)
        .await
    {
        tracing::debug!("cannot announce finished runs: {e}");
    }
}

/// `run_ids` as JSON arrays of at most [`MAX_PAYLOAD`] bytes each; an id too long for one is
/// announced as an empty payload (the listener reads every run it awaits).
fn payloads(run_ids: &[String]) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut size = 2;
    let flush = |current: &mut Vec<&str>, payloads: &mut Vec<String>| {
        if !current.is_empty() {
            payloads.push(serde_json::to_string(&current).unwrap_or_default());
            current.clear();
        }
    };
    for id in run_ids {
        let encoded = serde_json::to_string(id).map_or(usize::MAX, |e| e.len());
        if encoded.saturating_add(3) > MAX_PAYLOAD {
            payloads.push(String::new());
            continue;
        }
        if size + encoded + 1 > MAX_PAYLOAD {
            flush(&mut current, &mut payloads);
            size = 2;
        }
        current.push(id);
        size += encoded + 1;
    }
    flush(&mut current, &mut payloads);
    payloads
}

async fn listen(signal: Weak<Signal>, pool: PgPool, channel: String, mut stop: oneshot::Receiver<()>) {
    let wake = |payload: Option<&str>| signal.upgrade().map(|s| s.heard(payload)).is_some();
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
                    tracing::debug!("cannot listen on `{channel}`: {e}");
                    tokio::select! {
                        _ = &mut stop => return,
                        () = tokio::time::sleep(RECONNECT_AFTER) => continue,
                    }
                }
            },
        };
        // What was queued or finished while nobody listened is read now.
        if !wake(None) {
            return;
        }
        loop {
            let received = tokio::select! {
                _ = &mut stop => return,
                received = listener.try_recv() => received,
            };
            match received {
                // A notification, or the connection lost (reconnected on the next call).
                Ok(notification) => {
                    if !wake(notification.as_ref().map(|n| n.payload())) {
                        return;
                    }
                }
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => {
                    tracing::debug!("stopped listening on `{channel}`: {e}");
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
    use super::*;

    #[test]
    fn a_channel_is_named_after_its_schema_within_63_bytes() {
        assert_eq!(channel("public"), "redraft_queue:public");
        assert_eq!(finish_channel("public"), "redraft_done:public");
        let long = channel(&"é".repeat(40));
        assert!(long.len() <= 63 && long.starts_with("redraft_queue:é"), "{long}");
    }

    #[test]
    fn finished_runs_are_announced_in_payloads_the_database_takes() {
        let ids: Vec<String> = (0..2_000).map(|i| format!("run-\"{i}\"\n")).collect();
        let told = payloads(&ids);
        assert!(told.len() > 1);
        let mut read = Vec::new();
        for p in &told {
            assert!(p.len() <= MAX_PAYLOAD, "{}", p.len());
            read.extend(serde_json::from_str::<Vec<String>>(p).unwrap());
        }
        assert_eq!(read, ids, "every id once, in order, whatever its characters");
        assert!(payloads(&[]).is_empty());
        // An id too long for a notification: an empty one (read every awaited run).
        let long = vec!["a".into(), "x".repeat(MAX_PAYLOAD), "b".into()];
        assert_eq!(payloads(&long), vec![String::new(), r#"["a","b"]"#.to_owned()]);
    }
}
