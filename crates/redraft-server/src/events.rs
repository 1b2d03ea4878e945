//! Run events for SSE subscribers: `attempt_started`, `attempt_finished`, then `run_finished`,
//! or `awaiting_input` when the run stopped for a person's answer (the stream ends with either).
//!
//! A run in flight in this process is a [`LiveRun`]: its events so far are kept in a log and
//! broadcast as they happen, both under one lock, so a subscriber gets the log and then every
//! later event with nothing missed or doubled. A run that is not live here is replayed from
//! the store (and, if another process is still running it, the store is polled).

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::response::sse::Event;
use futures_util::stream::{self, BoxStream, StreamExt};
use redraft::core::{AttemptRecord, RunObserver, RunResult, RunStatus, Store, StoredRun};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;

/// Something that happened in a run.
#[derive(Debug, Clone)]
pub enum RunEvent {
    AttemptStarted {
        run_id: String,
        iteration: u32,
    },
    AttemptFinished {
        run_id: String,
        attempt: Arc<AttemptRecord>,
    },
    RunFinished(Arc<RunResult>),
    /// The run could not start or resume (the event stream ends with it).
    Error {
        run_id: String,
        message: String,
    },
}

impl RunEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::AttemptStarted { .. } => "attempt_started",
            RunEvent::AttemptFinished { .. } => "attempt_finished",
            RunEvent::RunFinished(result) if result.status == RunStatus::AwaitingInput => "awaiting_input",
            RunEvent::RunFinished(_) => "run_finished",
            RunEvent::Error { .. } => "error",
        }
    }

    /// The SSE event data.
    pub fn data(&self) -> Value {
        match self {
            RunEvent::AttemptStarted { run_id, iteration } => json!({"run_id": run_id, "iteration": iteration}),
            RunEvent::AttemptFinished { run_id, attempt } => json!({"run_id": run_id, "attempt": &**attempt}),
            RunEvent::RunFinished(result) => serde_json::to_value(&**result).unwrap_or(Value::Null),
            RunEvent::Error { run_id, message } => json!({"run_id": run_id, "message": message}),
        }
    }

    /// The attempt this event is about.
    pub fn iteration(&self) -> Option<u32> {
        match self {
            RunEvent::AttemptStarted { iteration, .. } => Some(*iteration),
            RunEvent::AttemptFinished { attempt, .. } => Some(attempt.iteration),
            _ => None,
        }
    }

    /// Whether the stream ends with this event.
    pub fn is_last(&self) -> bool {
        matches!(self, RunEvent::RunFinished(_) | RunEvent::Error { .. })
    }

    fn to_sse(&self, seq: usize) -> Event {
        Event::default().event(self.name()).id(seq.to_string()).data(self.data().to_string())
    }
}

/// The events of recorded attempts, as they happened: each attempt started, then finished.
pub fn replay(run_id: &str, attempts: &[AttemptRecord]) -> Vec<RunEvent> {
    attempts
        .iter()
        .flat_map(|a| {
            [
                RunEvent::AttemptStarted { run_id: run_id.to_owned(), iteration: a.iteration },
                RunEvent::AttemptFinished { run_id: run_id.to_owned(), attempt: Arc::new(a.clone()) },
            ]
        })
        .collect()
}

#[derive(Debug)]
struct Log {
    events: Vec<RunEvent>,
    /// Made by the first subscriber: most runs have none, and a channel holds room for
    /// [`LAG`] events from the start.
    tx: Option<broadcast::Sender<RunEvent>>,
    finished: bool,
}

/// How many events a subscriber may fall behind before it misses some.
const LAG: usize = 256;

/// A run in flight in this process.
#[derive(Debug)]
pub struct LiveRun {
    pub run_id: String,
    /// Fires to cancel the run (`DELETE /v1/runs/{id}`).
    pub cancel: CancellationToken,
    log: Mutex<Log>,
}

/// What a subscriber starts from.
#[derive(Debug)]
pub struct Subscription {
    pub past: Vec<RunEvent>,
    pub finished: bool,
    pub rx: broadcast::Receiver<RunEvent>,
}

impl LiveRun {
    pub fn new(run_id: String) -> Arc<Self> {
        Arc::new(Self {
            run_id,
            cancel: CancellationToken::new(),
            log: Mutex::new(Log { events: Vec::new(), tx: None, finished: false }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record and broadcast an event.
    pub fn push(&self, event: RunEvent) {
        let mut log = self.lock();
        if log.finished {
            return;
        }
        log.finished = event.is_last();
        if let Some(tx) = log.tx.as_ref().filter(|tx| tx.receiver_count() > 0) {
            // A receiver dropped meanwhile is not an error: nobody is watching any more.
            let _ = tx.send(event.clone());
        }
        log.events.push(event);
    }

    /// Whether the run's last event was pushed.
    pub fn is_finished(&self) -> bool {
        self.lock().finished
    }

    /// The events so far and every later one.
    pub fn subscribe(&self) -> Subscription {
        let mut log = self.lock();
        let rx = match &log.tx {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(LAG);
                log.tx = Some(tx);
                rx
            }
        };
        Subscription { past: log.events.clone(), finished: log.finished, rx }
    }

    /// The result, once the run finished.
    pub fn result(&self) -> Option<RunResult> {
        self.lock().events.iter().rev().find_map(|e| match e {
            RunEvent::RunFinished(r) => Some((**r).clone()),
            _ => None,
        })
    }

    /// Attempts finished so far in this process.
    pub fn attempts(&self) -> Vec<AttemptRecord> {
        self.lock()
            .events
            .iter()
            .filter_map(|e| match e {
                RunEvent::AttemptFinished { attempt, .. } => Some((**attempt).clone()),
                _ => None,
            })
            .collect()
    }

    /// Wait until the run finished (or `within` elapsed); its result if it did.
    pub async fn finished(&self, within: Duration) -> Option<RunResult> {
        let Subscription { finished, mut rx, .. } = self.subscribe();
        if finished {
            return self.result();
        }
        let wait = async {
            loop {
                match rx.recv().await {
                    Ok(RunEvent::RunFinished(r)) => return Some((*r).clone()),
                    Ok(RunEvent::Error { .. }) | Err(broadcast::error::RecvError::Closed) => return None,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                }
            }
        };
        tokio::time::timeout(within, wait).await.ok().flatten()
    }
}

/// Tells a [`LiveRun`] what happens in its run.
#[derive(Debug, Clone)]
pub struct LiveObserver(pub Arc<LiveRun>);

#[async_trait::async_trait]
impl RunObserver for LiveObserver {
    async fn attempt_started(&self, run_id: &str, iteration: u32) {
        self.0.push(RunEvent::AttemptStarted { run_id: run_id.to_owned(), iteration });
    }

    async fn attempt_finished(&self, run_id: &str, attempt: &AttemptRecord) {
        self.0.push(RunEvent::AttemptFinished { run_id: run_id.to_owned(), attempt: Arc::new(attempt.clone()) });
    }

    async fn run_finished(&self, result: &RunResult) {
        self.0.push(RunEvent::RunFinished(Arc::new(result.clone())));
    }
}

type Events = BoxStream<'static, RunEvent>;

/// The events of a live run: attempts it was resumed with (from the store), the log so far,
/// then live events, ending after `run_finished`.
pub fn live_stream(live: &LiveRun, stored: Option<StoredRun>) -> Events {
    let Subscription { past, finished, rx } = live.subscribe();
    let first_live = past.iter().find_map(RunEvent::iteration);
    // Attempts recorded before this process took the run over (a resumed run) are only in
    // the store; later ones are in the log (which is written before the store).
    let restored: Vec<AttemptRecord> = stored
        .map(|s| s.attempts)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| first_live.is_none_or(|first| a.iteration < first))
        .collect();
    let mut events = replay(&live.run_id, &restored);
    events.extend(past);
    let head = stream::iter(events);
    if finished {
        return head.boxed();
    }
    let tail = BroadcastStream::new(rx).filter_map(|r| async move { r.ok() });
    head.chain(tail).boxed()
}

/// The events of a run that is not live here: replayed from the store; while the store says
/// it is unfinished (another process runs it), new attempts are polled for.
pub fn stored_stream(store: Arc<dyn Store>, stored: StoredRun, poll: Duration) -> Events {
    let run_id = stored.run_id.clone();
    stream::unfold((Some(stored), 0usize, false), move |(next, sent, done)| {
        let store = store.clone();
        let run_id = run_id.clone();
        async move {
            if done {
                return None;
            }
            let mut stored = next;
            loop {
                if let Some(s) = stored.take() {
                    let mut events = replay(&run_id, s.attempts.get(sent..).unwrap_or_default());
                    let sent = s.attempts.len().max(sent);
                    let finished = match s.result.filter(|_| s.state.has_result()) {
                        Some(result) => {
                            events.push(RunEvent::RunFinished(Arc::new(result)));
                            true
                        }
                        None => false,
                    };
                    if !events.is_empty() || finished {
                        return Some((stream::iter(events), (None, sent, finished)));
                    }
                }
                tokio::time::sleep(poll).await;
                match store.run(&run_id).await {
                    Ok(Some(s)) => stored = Some(s),
                    Ok(None) => return None,
                    Err(e) => {
                        let message = format!("cannot read the run from the store: {e}");
                        let events = vec![RunEvent::Error { run_id: run_id.clone(), message }];
                        return Some((stream::iter(events), (None, sent, true)));
                    }
                }
            }
        }
    })
    .flatten()
    .boxed()
}

/// SSE events, numbered, ending after the last event of the run or at `stop`.
pub fn sse(events: Events, stop: CancellationToken) -> BoxStream<'static, Result<Event, Infallible>> {
    events
        .scan(false, |ended, event| {
            let out = (!*ended).then_some(event);
            if let Some(e) = &out {
                *ended = e.is_last();
            }
            async move { out }
        })
        .enumerate()
        .map(|(seq, e)| Ok(e.to_sse(seq + 1)))
        .take_until(stop.cancelled_owned())
        .boxed()
}
