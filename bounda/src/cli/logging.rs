//! A service's logging: the runtime's logs and spans to standard error, written by a thread of
//! its own so that a slow reader never stops the worker.

use tracing_subscriber::EnvFilter;

/// How many log lines wait for a slow standard error before more are dropped.
const LOG_LINES_BUFFERED: usize = 10_000;

/// Logging to standard error, `RUST_LOG` choosing what (warnings by default), until dropped.
/// When standard error is read too slowly (a pipe to a busy log shipper), lines are dropped
/// rather than the worker stopped, and how many is said when it is dropped.
pub struct Logging {
    _flush: tracing_appender::non_blocking::WorkerGuard,
    dropped: tracing_appender::non_blocking::ErrorCounter,
}

impl Logging {
    /// Installs it as the process's subscriber, its writer's thread named after `service`;
    /// `None` when the process has one already (a test's), which is kept.
    pub fn install(service: &str) -> Option<Logging> {
        let (writer, flush) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(LOG_LINES_BUFFERED)
            .thread_name(&format!("{service}-log"))
            .finish(std::io::stderr());
        let dropped = writer.error_counter();
        // `RUST_LOG` unset means warnings; set but unreadable, it is said once logging runs.
        let (filter, unreadable) = match std::env::var(EnvFilter::DEFAULT_ENV) {
            Err(_) => (EnvFilter::new("warn"), None),
            Ok(text) => match EnvFilter::try_new(&text) {
                Ok(filter) => (filter, None),
                Err(error) => (EnvFilter::new("warn"), Some((text, error))),
            },
        };
        // Each event is one line, its control characters escaped (the writer is handed a whole
        // formatted line at a time), so stored text cannot forge a line of its own; without
        // colors, whose escapes would be escaped too.
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || super::escape::Lines(writer.clone()))
            .try_init()
            .ok()?;
        if let Some((text, error)) = unreadable {
            tracing::warn!("`RUST_LOG={text}` does not read ({error}): warnings are logged");
        }
        Some(Logging {
            _flush: flush,
            dropped,
        })
    }
}

impl Drop for Logging {
    fn drop(&mut self) {
        // Said through the same writer, so a reader that stopped reading cannot hold the exit.
        let dropped = self.dropped.dropped_lines();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "log lines were dropped: standard error was read too slowly"
            );
        }
    }
}
