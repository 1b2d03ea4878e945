//! The queue both PostgreSQL group commits share (`pg_batch` for queued runs, `pg_finish` for
//! results): callers send work to one task and wait for its answer; the task takes whatever
//! has gathered, up to a bound, writes it, and answers each caller once its write is committed.
//! What a batch becomes (statements, fallbacks, announcements) stays with each group commit.

use redraft_core::store::StoreError;
use tokio::sync::{mpsc, oneshot};

/// One caller's work and where its answer goes.
pub(crate) struct Job<T, R> {
    pub item: T,
    done: oneshot::Sender<Result<R, StoreError>>,
}

impl<T, R> Job<T, R> {
    /// A job no caller waits for (tests of how batches are split).
    #[cfg(test)]
    pub fn detached(item: T) -> Self {
        Self { item, done: oneshot::channel().0 }
    }

    /// Answer the caller (one gone meanwhile is not waiting for anything).
    pub fn answer(self, outcome: Result<R, StoreError>) {
        let _ = self.done.send(outcome);
    }
}

/// Where callers send their work; cheap to clone.
pub(crate) struct Queue<T, R> {
    jobs: mpsc::UnboundedSender<Job<T, R>>,
    /// What a caller was doing, for the error when the task is gone ("queue a run").
    action: &'static str,
}

impl<T, R> Clone for Queue<T, R> {
    fn clone(&self) -> Self {
        Self { jobs: self.jobs.clone(), action: self.action }
    }
}

impl<T, R> std::fmt::Debug for Queue<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("action", &self.action).finish_non_exhaustive()
    }
}

/// The task's side: the batches, as they gather.
pub(crate) struct Batches<T, R> {
    queue: mpsc::UnboundedReceiver<Job<T, R>>,
    max: usize,
}

/// A queue for callers doing `action`, and the batches (at most `max` jobs each) for the task
/// that writes them. The batches end when every [`Queue`] is dropped.
pub(crate) fn queue<T, R>(action: &'static str, max: usize) -> (Queue<T, R>, Batches<T, R>) {
    let (jobs, queue) = mpsc::unbounded_channel();
    (Queue { jobs, action }, Batches { queue, max: max.max(1) })
}

impl<T, R> Queue<T, R> {
    /// Send `item` with the next batch; its answer once that batch is written.
    pub async fn submit(&self, item: T) -> Result<R, StoreError> {
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { item, done }).map_err(|_| self.closed())?;
        answer.await.unwrap_or_else(|_| Err(self.closed()))
    }

    fn closed(&self) -> StoreError {
        StoreError::Query { action: self.action.into(), message: "the store is closed".into() }
    }
}

impl<T, R> Batches<T, R> {
    /// The jobs sent since the last batch (waiting for one if none is), or `None` once every
    /// queue is dropped.
    pub async fn next(&mut self) -> Option<Vec<Job<T, R>>> {
        let mut batch = Vec::with_capacity(self.max.min(64));
        (self.queue.recv_many(&mut batch, self.max).await > 0).then_some(batch)
    }
}

/// Answer every job of `jobs` with the same failure to reach the database: `action` names
/// each job's part ("finish run `ID`").
pub(crate) fn fail_all<T, R>(jobs: Vec<Job<T, R>>, action: impl Fn(&T) -> String, message: &str) {
    for job in jobs {
        let action = action(&job.item);
        job.answer(Err(StoreError::Query { action, message: message.to_owned() }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn callers_get_the_answers_of_their_own_jobs_and_an_error_once_the_task_is_gone() {
        let (queue, mut batches) = queue::<u32, u32>("count", 4);
        let task = tokio::spawn(async move {
            let mut sizes = Vec::new();
            while let Some(batch) = batches.next().await {
                sizes.push(batch.len());
                for job in batch {
                    let doubled = job.item * 2;
                    job.answer(Ok(doubled));
                }
            }
            sizes
        });
        let answers = futures_util::future::join_all((0..10).map(|i| queue.submit(i))).await;
        let answers: Vec<u32> = answers.into_iter().map(|a| a.unwrap()).collect();
        assert_eq!(answers, (0..10).map(|i| i * 2).collect::<Vec<_>>());
        drop(queue);
        let sizes = task.await.unwrap();
        assert!(sizes.iter().all(|&n| (1..=4).contains(&n)), "batches of at most 4: {sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 10);

        let (queue, batches) = super::queue::<u32, u32>("count", 4);
        drop(batches);
        let err = queue.submit(1).await.unwrap_err();
        assert!(err.to_string().contains("the store is closed"), "{err}");
    }
}
