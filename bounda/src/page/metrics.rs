//! The metrics the page serves at `/metrics`, in Prometheus's text format: the process's
//! recorder for the `metrics` facade, and the gauges surveyed from the store at each scrape.

pub use metrics_exporter_prometheus::PrometheusRecorder;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::Error;
use crate::metrics::{COMMIT_SECONDS, DEADLINE_LATENESS};

/// Lateness buckets, in seconds: on time, then a second to a week late.
const LATENESS: [f64; 11] = [
    0.001, 1.0, 10.0, 60.0, 300.0, 900.0, 3_600.0, 21_600.0, 86_400.0, 259_200.0, 604_800.0,
];

/// Commit buckets, in seconds: half a millisecond to five seconds.
const COMMIT: [f64; 11] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// The process's Prometheus recorder: install it once, at start, and give it to the page's
/// [`Options::metrics`](super::Options::metrics), which then serves `/metrics`.
///
/// ```no_run
/// # fn main() -> Result<(), bounda::Error> {
/// let metrics = bounda::page::Metrics::install()?;
/// let options = bounda::page::Options {
///     metrics: Some(metrics),
///     ..bounda::page::Options::default()
/// };
/// # let _ = options;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Installs a Prometheus recorder as the process's `metrics` recorder, with histogram
    /// buckets for deadline lateness and commit time, and a thread that folds its histograms
    /// every five seconds. Fails when the process has a recorder already: install one per
    /// process.
    pub fn install() -> Result<Metrics, Error> {
        let (metrics, recorder) = Metrics::unregistered()?;
        ::metrics::set_global_recorder(recorder).map_err(|error| Error::Configuration {
            message: format!("the metrics recorder cannot be installed: {error}"),
        })?;
        crate::metrics::record(true);
        crate::app::metrics::describe();
        // Histograms keep their samples until upkeep folds them: every few seconds, whether
        // anyone scrapes or not.
        let handle = metrics.handle.clone();
        std::thread::Builder::new()
            .name("bounda-metrics-upkeep".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    handle.run_upkeep();
                }
            })
            .map_err(|error| Error::Configuration {
                message: format!("the metrics' upkeep cannot start: {error}"),
            })?;
        Ok(metrics)
    }

    /// A Prometheus recorder and its page exporter, the recorder not installed: for a test that
    /// sets it for its own thread (`metrics::set_default_local_recorder`), or an app that fans
    /// several recorders out itself (it then calls [`record`](crate::metrics::record) and
    /// upkeep itself).
    pub fn unregistered() -> Result<(Metrics, PrometheusRecorder), Error> {
        let refused = |error: metrics_exporter_prometheus::BuildError| Error::Configuration {
            message: format!("the metrics recorder cannot be built: {error}"),
        };
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(DEADLINE_LATENESS.to_owned()), &LATENESS)
            .map_err(refused)?
            .set_buckets_for_metric(Matcher::Full(COMMIT_SECONDS.to_owned()), &COMMIT)
            .map_err(refused)?
            .build_recorder();
        Ok((
            Metrics {
                handle: recorder.handle(),
            },
            recorder,
        ))
    }

    /// Everything recorded, in Prometheus's text exposition format.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Everything recorded, as the answer to a scrape: the text with its content type.
    pub(crate) fn exposition(&self) -> axum::response::Response {
        use axum::http::{HeaderValue, header};
        use axum::response::IntoResponse;
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            self.render(),
        )
            .into_response()
    }

    /// Serves what this process records at `/metrics` on `listen` until the process ends: a
    /// worker's own counters and histograms (how late its deadlines ran, how long its commits
    /// took), which Prometheus scrapes from each worker; the page serves the store's gauges.
    pub async fn serve(self, listen: std::net::SocketAddr) -> Result<std::net::SocketAddr, Error> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| Error::Configuration {
                message: format!("cannot listen for metrics on {listen}: {error}"),
            })?;
        let address = listener
            .local_addr()
            .map_err(|error| Error::Configuration {
                message: format!("cannot read the metrics' address: {error}"),
            })?;
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = self.clone();
                async move { metrics.exposition() }
            }),
        );
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!("the metrics listener stopped: {error}");
            }
        });
        Ok(address)
    }
}
