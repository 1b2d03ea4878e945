//! Listening: the loopback rule, the server's worker, graceful shutdown.
//!
//! Without tokens the server listens on loopback addresses only; `[server] allowed_hosts` names
//! hosts it answers to, never addresses it listens on.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;

use redraft::ConfigError;
use redraft::config::Config;
use redraft::limits::Files;
use tokio::net::TcpListener;

use crate::listener::Bounded;
use crate::origin::{AllowListError, Allowed};
use crate::router;
use crate::state::AppState;

/// The server cannot start, or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("`{addr}` is not an address to listen on: {message}\nhint: write it as HOST:PORT, e.g. `127.0.0.1:8080`")]
    Addr { addr: String, message: String },
    #[error(
        "refusing to listen on `{addr}` without tokens: anyone who can reach it could run models at your expense\nhint: set `{tokens_env}` to one or more comma-separated bearer tokens, or listen on a loopback address such as `127.0.0.1:8080`"
    )]
    Exposed { addr: String, tokens_env: String },
    #[error("cannot listen on `{addr}`: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] redraft::core::StoreError),
    #[error(transparent)]
    AllowList(#[from] AllowListError),
    #[error("the server failed: {source}")]
    Serve {
        #[source]
        source: std::io::Error,
    },
}

/// The bearer tokens in the environment variable `name` (comma-separated). Each becomes a known
/// secret ([`redraft::core::secrets`]): no response, log or stored run shows it.
pub fn tokens_from_env(name: &str) -> Vec<String> {
    let tokens: Vec<String> = std::env::var(name)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    for token in &tokens {
        redraft::core::secrets::register(token);
    }
    tokens
}

/// A server bound to its address, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: AppState,
    /// Connections admitted at once (the open-files budget left by the run slots).
    files: Arc<Files>,
}

/// Connections the kernel may hold before they are accepted (capped by its `somaxconn`). A
/// burst of clients connecting at once overflows a short queue, and a connection refused there
/// waits the client's SYN retry (1 s, then 3 s, 7 s…) before the server even sees it.
const LISTEN_BACKLOG: u32 = 4096;

/// Listen on the first of `addrs` that binds (as `TcpListener::bind` does), with a backlog of
/// [`LISTEN_BACKLOG`].
fn listen(addrs: &[SocketAddr]) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in addrs {
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() };
        let bound = socket.and_then(|socket| {
            socket.set_reuseaddr(true)?;
            socket.bind(*addr)?;
            socket.listen(LISTEN_BACKLOG)
        });
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")))
}

impl Server {
    /// Check the address (a non-loopback one needs tokens) and the `allowed_hosts` and
    /// `cors_origins` lists, open the store the config names and listen. `addr` overrides the config's `[server] addr`; port 0 picks a free port.
    pub async fn bind(config: Config, addr: Option<&str>, tokens: Vec<String>) -> Result<Self, ServerError> {
        let addr = addr.unwrap_or(&config.server.addr).to_owned();
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr.as_str())
            .await
            .map_err(|e| ServerError::Addr { addr: addr.clone(), message: e.to_string() })?
            .collect();
        if addrs.is_empty() {
            return Err(ServerError::Addr { addr, message: "it resolves to no address".into() });
        }
        let has_tokens = tokens.iter().any(|t| !t.trim().is_empty());
        if !has_tokens && addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(ServerError::Exposed { addr, tokens_env: config.server.tokens_env.clone() });
        }
        Allowed::from_config(&config.server, has_tokens)?;
        let mut config = config;
        let files = fit_to_open_files(&mut config);
        let store = redraft::store::open(&config).await?;
        let state = AppState::sharing_files(config, store, tokens, files.clone())?;
        let listener = listen(&addrs).map_err(|source| ServerError::Bind { addr, source })?;
        Ok(Self { listener, state, files })
    }

    /// The address it listens on (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, ServerError> {
        self.listener.local_addr().map_err(|source| ServerError::Serve { source })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serve until `shutdown` completes, executing runs from the queue in this server's slots
    /// (none with `max_concurrent_runs = 0`, `--no-worker`). Then stop accepting and claiming,
    /// let the runs executing here finish within the grace period, put those still unfinished
    /// back in the queue (every attempt is already recorded; another worker, or the next
    /// start, resumes them) and return.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServerError> {
        let Self { listener, state, files } = self;
        let listener = Bounded::new(listener, files, state.shared_metrics());
        let executor = state.executor().clone();
        let stop = state.shutdown().clone();
        let app = router(state.clone());
        // `into_make_service` hands each connection a clone of the router; serving the router
        // itself rebuilds its route table for every connection.
        let serving =
            axum::serve(listener, app.into_make_service()).with_graceful_shutdown(stop.clone().cancelled_owned());
        let mut serving = tokio::spawn(serving.into_future());
        tokio::select! {
            () = shutdown => {}
            ended = &mut serving => {
                executor.stop(std::time::Duration::ZERO).await;
                return match ended {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(source)) => Err(ServerError::Serve { source }),
                    Err(e) => Err(ServerError::Serve { source: std::io::Error::other(e.to_string()) }),
                };
            }
        }
        let grace = state.config().server.grace_period;
        tracing::warn!(
            runs_in_flight = state.in_flight(),
            "shutting down: no new connections or runs; runs in flight have {} to finish",
            redraft::core::duration::format(grace)
        );
        stop.cancel();
        let released = executor.stop(grace).await;
        if released > 0 {
            tracing::warn!(
                released,
                "the grace period is over: unfinished runs went back to the queue and resume from their last recorded attempt"
            );
        }
        // Requests still waiting (for runs queued elsewhere) get a moment to be answered.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), serving).await;
        Ok(())
    }
}

/// Fit the run slots and the connections to the open-files limit (raised to the hard limit
/// first). What the reserve and the commands' share leave is shared by runs and connections as
/// they come ([`Files`]): runs always have a third of it (or all their slots need, if less), and
/// take what else no connection holds but a headroom kept for arriving connections; a
/// connection is admitted while it leaves the runs that third (a connection waiting for its run
/// in the queue costs one descriptor; a refused one is a 503 the client sees).
fn fit_to_open_files(config: &mut Config) -> Arc<Files> {
    use redraft::limits::{FILES_PER_RUN, fit_slots, open_files, shared_files};
    let Some(limit) = open_files() else { return Files::new(u64::MAX, 0) };
    let shared = shared_files(limit);
    let slots = config.server.max_concurrent_runs;
    // At least 16 connections, however low the limit.
    let for_runs = shared.saturating_sub(16);
    if let Err(fit) = fit_slots(slots, for_runs) {
        tracing::warn!(
            "`[server] max_concurrent_runs` = {slots} needs more open files than the limit of {limit} leaves: executing at most {fit} at once, fewer while clients hold connections (raise `ulimit -n` for more)"
        );
        config.server.max_concurrent_runs = fit;
    }
    let runs = u64::try_from(config.server.max_concurrent_runs).unwrap_or(u64::MAX).saturating_mul(FILES_PER_RUN);
    Files::new(shared.max(17), runs.min((shared / 3).max(1)))
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
