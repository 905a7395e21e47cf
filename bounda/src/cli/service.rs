//! A service in a few lines: the whole command set of a bounda app (`work`, `serve`, `copy`,
//! `preview` and the operator's commands) as one clap command, with the store opened from a path
//! or a server's address, logging, SIGTERM and exit codes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::Config;
use crate::preview::PortCalls;
use crate::store::{Address, Opener, Opening, Place};
use crate::{App, AppBuilder, Duration, Error};

use super::{CopyArgs, Operator, PreviewArgs};

/// The options every command of a service takes: where its store is, its settings, and the
/// flags an operator overrides them with. Each can come from the environment.
#[derive(Debug, Clone, Default, Args)]
pub struct ServiceArgs {
    /// The database: a SQLite file's path, or a PostgreSQL server's address
    /// (`postgres://user:password@host/dbname`) for workers on several machines. The service's
    /// name with `.db` unless given.
    #[arg(long, env = "BOUNDA_DB", global = true)]
    pub db: Option<Address>,
    /// On a server, the schema that holds the tables, created if missing. The service's name
    /// unless given.
    #[arg(long, env = "BOUNDA_SCHEMA", global = true)]
    pub schema: Option<String>,
    /// On a server, a prefix to every table's name (`shop_`), so two services share a schema.
    #[arg(long, env = "BOUNDA_PREFIX", global = true, default_value = "")]
    pub prefix: String,
    /// The runtime's settings, a JSON file (`{ "limits": .. , "processes": .. }`); a flag below
    /// wins over it.
    #[arg(long, env = "BOUNDA_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Names this process in the claims it takes (`machine-1/<id>`), so the store shows which
    /// process holds a run.
    #[arg(long, env = "RUNNER_NAME", global = true)]
    pub runner_name: Option<String>,
    /// How long one handler run may take (commands, policies, processes). A crashed run's claims
    /// lapse after twice this, so a restart after a SIGKILL resumes its work then.
    #[arg(long, env = "HANDLER_TIMEOUT", global = true, value_parser = time_limit)]
    pub handler_timeout: Option<Duration>,
    /// How many runs a worker takes and commits together: larger batches give more throughput,
    /// a batch of 1 commits each run on its own.
    #[arg(
        long,
        env = "BATCH_SIZE",
        global = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub batch_size: Option<u32>,
    /// How long the runtime waits before trying a failing store again, doubling each time.
    #[arg(long, env = "BACKOFF", global = true)]
    pub backoff: Option<Duration>,
}

/// The commands of a service: flatten them into an app's own (`#[command(flatten)]`), or run
/// [`Service::main`] for a binary that has none of its own.
#[derive(Debug, Clone, Subcommand)]
pub enum ServiceCommand {
    /// Runs the dispatcher and the worker until SIGTERM or Ctrl-C: every handler, deadline and
    /// delayed command, each completing once however many workers share the store.
    Work(WorkArgs),
    /// Serves the operator page until SIGTERM or Ctrl-C: lag, the deadlines ahead, the
    /// instances, the dead letters, each instance's story, and `/metrics`. Operators sign in
    /// with the token in `PAGE_TOKEN` to act (retries, pauses); without it the page only reads.
    /// Its one credential is that shared token: beyond loopback, serve it behind the operators'
    /// authenticating proxy.
    #[cfg(feature = "page")]
    Serve(super::ServeArgs),
    /// Copies the database into a new SQLite file: production's data, to preview a deploy on
    /// (`preview`) without touching it. Works while production runs.
    Copy(CopyArgs),
    /// Runs this build on a copy `copy` made (`--db copy.db`), on simulated time from the
    /// moment it was taken, with the ports replaced by doubles that record and succeed, and
    /// reports what would happen. Runs on a copy in memory: the file is left as it was. Exits 3
    /// when a letter would be filed or the data does not read through this build.
    Preview(PreviewArgs),
    /// Brings the database to this build's schema, creating it if missing, then exits: what a
    /// deploy runs before its operators' commands (a runner does it too when it starts). The
    /// operator's commands never create or upgrade a database.
    Migrate,
    /// The operator's commands: `lag`, `instances`, `pause`, `dead-letters`, `explain`, ..
    #[command(flatten)]
    Operator(Operator),
}

/// How long `work` runs.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {
    /// Stop after this many seconds.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// How long `work` waits for a store out of reach when it starts (a database server
    /// starting with the machine, a failover), trying again with its back-off and saying so in
    /// the log; `0s` gives up at once. Once running, an outage is waited out however long.
    #[arg(long, env = "STORE_WAIT", default_value = "5m")]
    pub store_wait: Duration,
    /// Serves this worker's own counters and histograms (how late its deadlines ran, how long
    /// its commits took) at `/metrics` on this address (`127.0.0.1:9464`), for Prometheus to
    /// scrape each worker; off unless given. `serve` has the store's gauges.
    #[cfg(feature = "page")]
    #[arg(long, env = "METRICS_LISTEN", value_name = "ADDRESS")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// A binary that is a service and nothing more: its options and its commands.
#[derive(Debug, Parser)]
struct ServiceCli {
    #[command(flatten)]
    args: ServiceArgs,
    #[command(subcommand)]
    command: ServiceCommand,
}

/// What builds the app on a store's builder.
type Build = Arc<dyn Fn(AppBuilder) -> AppBuilder + Send + Sync>;
/// What builds the app for a preview, its ports doubles recording into the calls.
type BuildPreview = Arc<dyn Fn(AppBuilder, PortCalls) -> AppBuilder + Send + Sync>;

/// A service: its name, how it opens its store, and how it builds its app.
///
/// ```no_run
/// # async fn example() -> std::process::ExitCode {
/// # struct Sms;
/// bounda::cli::Service::new("shop", bounda_sqlite::Files)
///     .app(|builder| builder.port(std::sync::Arc::new(Sms)))
///     .main()
///     .await
/// # }
/// ```
#[derive(Clone)]
pub struct Service {
    name: String,
    opener: Arc<dyn Opener>,
    build: Build,
    preview: Option<BuildPreview>,
}

impl Service {
    /// A service named `name` (its default file, schema and log thread), opening its store with
    /// `opener`: `bounda_sqlite::Files`, or `bounda_postgres::Servers(bounda_sqlite::Files)`.
    pub fn new(name: impl Into<String>, opener: impl Opener + 'static) -> Service {
        Service {
            name: name.into(),
            opener: Arc::new(opener),
            build: Arc::new(|builder| builder),
            preview: None,
        }
    }

    /// How the app is built on its store's builder, which holds the settings already: its ports,
    /// and what the binary does not register itself.
    pub fn app(
        mut self,
        build: impl Fn(AppBuilder) -> AppBuilder + Send + Sync + 'static,
    ) -> Service {
        self.build = Arc::new(build);
        self
    }

    /// How the app is built for `preview`: with doubles of its ports that record each call in
    /// the [`PortCalls`] given and succeed, so a preview tells nobody and charges nothing.
    /// Without it, `preview` is refused.
    pub fn preview(
        mut self,
        build: impl Fn(AppBuilder, PortCalls) -> AppBuilder + Send + Sync + 'static,
    ) -> Service {
        self.preview = Some(Arc::new(build));
        self
    }

    /// The whole binary: logging to standard error (`RUST_LOG`, warnings by default), the
    /// options and commands read from the command line, and the command run to its exit code.
    pub async fn main(self) -> ExitCode {
        let _logging = super::logging::Logging::install(&self.name);
        let command = ServiceCli::command().name(self.name.clone());
        let parsed = command
            .try_get_matches()
            .and_then(|mut matches| ServiceCli::from_arg_matches_mut(&mut matches));
        let cli = match parsed {
            Ok(cli) => cli,
            Err(error) => {
                // Help and the version print to standard output and succeed; a mistake exits 2.
                let _ = error.print();
                return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
            }
        };
        self.run(&cli.args, cli.command).await
    }

    /// Runs `command` with `args`: 0 when it succeeded, 1 when it failed (the error printed),
    /// and the operator's commands' own codes (2 when a retry failed, 3 when `check` or
    /// `preview` found what a deploy would meet). `work` and `serve` stop cleanly on SIGTERM or
    /// Ctrl-C, the run in flight finishing; an operator's command ends at once on Ctrl-C.
    pub async fn run(&self, args: &ServiceArgs, command: ServiceCommand) -> ExitCode {
        let result = match command {
            ServiceCommand::Copy(copy) => return self.copy(args, &copy.to).await,
            ServiceCommand::Preview(preview) => return self.run_preview(args, preview).await,
            ServiceCommand::Migrate => self.migrate(args).await,
            ServiceCommand::Operator(command) => {
                let opening = match command.only_reads() {
                    true => Opening::AsIs,
                    false => Opening::Existing,
                };
                match self.open(args, opening).await {
                    Ok(app) => return super::run(&app, command).await,
                    Err(error) => Err(error),
                }
            }
            ServiceCommand::Work(work) => {
                // Installed before anything is opened: a SIGTERM from here stops cleanly.
                let mut shutdown = Box::pin(crate::shutdown_signal());
                #[cfg(feature = "page")]
                if let Some(listen) = work.metrics {
                    let serving = match crate::page::Metrics::install() {
                        Ok(metrics) => metrics.serve(listen).await,
                        Err(error) => Err(error),
                    };
                    match serving {
                        Ok(address) => tracing::info!("metrics on http://{address}/metrics"),
                        Err(error) => return exit(Err(error)),
                    }
                }
                match self
                    .open_waiting(args, work.store_wait, &mut shutdown)
                    .await
                {
                    Ok(Some(app)) => run_work(&app, work.seconds, shutdown).await,
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                }
            }
            #[cfg(feature = "page")]
            ServiceCommand::Serve(serve) => {
                let shutdown = crate::shutdown_signal();
                match self.open(args, Opening::Existing).await {
                    Ok(app) => super::serve::serve(app, serve, shutdown).await,
                    Err(error) => Err(error),
                }
            }
        };
        exit(result)
    }

    /// The app on the store `args` name, with the settings of its file and flags: for an app's
    /// own commands. `opening` says whether the store may be created and upgraded
    /// ([`Opening::Create`], a runner's), must exist at this build's schema
    /// ([`Opening::Existing`], an operator's that writes), or is only read
    /// ([`Opening::AsIs`]: the app then builds [`reading_only`](crate::AppBuilder::reading_only)).
    pub async fn open(&self, args: &ServiceArgs, opening: Opening) -> Result<App, Error> {
        let config = self.config(args)?;
        let store = self
            .opener
            .open(&self.address(args), &self.place(args), opening)
            .await?;
        let mut builder = App::builder_shared(store).config(config);
        if opening == Opening::AsIs {
            builder = builder.reading_only();
        }
        if let Some(name) = &args.runner_name {
            builder = builder.runner_name(name.clone());
        }
        (self.build)(builder).build().await
    }

    /// The app as a runner opens it, waiting up to `limit` for a store out of reach, with the
    /// runtime's back-off; `None` when `shutdown` came first.
    async fn open_waiting(
        &self,
        args: &ServiceArgs,
        limit: Duration,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> Result<Option<App>, Error> {
        let backoff = self.config(args)?.dispatcher.backoff;
        let started = std::time::Instant::now();
        let mut failures = 0;
        loop {
            let error = match self.open(args, Opening::Create).await {
                Ok(app) => {
                    if failures > 0 {
                        tracing::info!(failures, "the store answers: starting");
                    }
                    return Ok(Some(app));
                }
                Err(error) if error.is_unavailable() => error,
                Err(error) => return Err(error),
            };
            let waited = started.elapsed();
            let left = StdDuration::from(limit).saturating_sub(waited);
            if left.is_zero() {
                tracing::error!(
                    code = error.code(),
                    "the store stayed out of reach for {limit} after start; giving up \
                     (`--store-wait` sets how long): {}",
                    crate::error::chain(&error)
                );
                return Err(error);
            }
            failures += 1;
            let wait = StdDuration::from(backoff.delay_after(failures)).min(left);
            tracing::warn!(
                code = error.code(),
                failures,
                "the store is out of reach at start: waiting for it, up to {limit}: {}",
                crate::error::chain(&error)
            );
            tokio::select! {
                biased;
                () = &mut *shutdown => return Ok(None),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// `migrate`: the store `args` name, created if missing and brought to this build's schema.
    async fn migrate(&self, args: &ServiceArgs) -> Result<(), Error> {
        let address = self.address(args);
        self.opener
            .open(&address, &self.place(args), Opening::Create)
            .await?;
        // A reader that went away took nothing it needed: the migration is done.
        let _ = writeln!(std::io::stdout(), "`{address}` is at this build's schema");
        Ok(())
    }

    /// The store's address: `--db`, or the service's name with `.db`.
    pub fn address(&self, args: &ServiceArgs) -> Address {
        args.db
            .clone()
            .unwrap_or_else(|| Address::File(PathBuf::from(format!("{}.db", self.name))))
    }

    /// Where a server's tables go: `--schema` (the service's name unless given) and `--prefix`.
    fn place(&self, args: &ServiceArgs) -> Place {
        Place {
            schema: args.schema.clone().unwrap_or_else(|| self.name.clone()),
            prefix: args.prefix.clone(),
        }
    }

    /// The settings: the file's, or the defaults, with the flags given over them.
    pub fn config(&self, args: &ServiceArgs) -> Result<Config, Error> {
        let mut config = match &args.config {
            None => Config::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| Error::Configuration {
                    message: format!("cannot read the settings `{}`: {error}", path.display()),
                })?;
                Config::from_json(&text).map_err(|error| Error::Configuration {
                    message: format!("in `{}`: {error}", path.display()),
                })?
            }
        };
        if let Some(timeout) = args.handler_timeout {
            config.commands.timeout = timeout;
            config.policies.timeout = timeout;
            config.processes.handler_timeout = timeout;
        }
        if let Some(size) = args.batch_size {
            config.dispatcher.batch_size = size as usize;
        }
        if let Some(backoff) = args.backoff {
            config.dispatcher.backoff.base_delay = backoff;
        }
        config.validate().map_err(|error| Error::Configuration {
            message: error.to_string(),
        })?;
        Ok(config)
    }

    /// `copy`: the store, as it is, into the new SQLite file `to`, written under a `.partial`
    /// name and renamed once whole, so a copy cut short is never taken for one.
    async fn copy(&self, args: &ServiceArgs, to: &Path) -> ExitCode {
        let mut partial = to.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let address = self.address(args);
        let stores = async {
            if to.exists() {
                return Err(Error::Configuration {
                    message: format!("`{}` exists: copy into a new file", to.display()),
                });
            }
            let from = self
                .opener
                .open(&address, &self.place(args), Opening::AsIs)
                .await?;
            // What an earlier copy cut short left is never a copy.
            remove_partial(&partial)?;
            let to = self.opener.new_file(&partial).await?;
            Ok((from, to))
        };
        let (from, copy) = match stores.await {
            Ok(stores) => stores,
            Err(error) => return exit(Err(error)),
        };
        let code = super::copy(from.as_ref(), copy.as_ref(), &address.to_string()).await;
        drop(copy);
        let finished = match code == ExitCode::SUCCESS {
            true => std::fs::rename(&partial, to).map_err(|error| Error::Configuration {
                message: format!("cannot finish the copy `{}`: {error}", to.display()),
            }),
            false => remove_partial(&partial),
        };
        match finished {
            Ok(()) => code,
            Err(error) => exit(Err(error)),
        }
    }

    /// `preview`: this build on a copy in memory of the store at `--db`, its ports doubles.
    async fn run_preview(&self, args: &ServiceArgs, preview: PreviewArgs) -> ExitCode {
        let Some(build) = &self.preview else {
            return exit(Err(Error::Configuration {
                message: "this service has no preview: give `Service::preview` the doubles of \
                          its ports, which record each call and succeed"
                    .to_owned(),
            }));
        };
        let scratch = async {
            let config = self.config(args)?;
            let address = self.address(args);
            let kept = self
                .opener
                .open(&address, &self.place(args), Opening::AsIs)
                .await?;
            let scratch = self
                .opener
                .scratch_copy(kept.as_ref(), &address.to_string())
                .await?;
            Ok::<_, Error>((scratch, config))
        };
        let (scratch, config) = match scratch.await {
            Ok(scratch) => scratch,
            Err(error) => return exit(Err(error)),
        };
        let calls = PortCalls::default();
        let builder = App::builder_shared(scratch).config(config);
        let builder = build(builder, calls.clone()).port(calls);
        super::preview(builder, preview).await
    }
}

/// Runs the dispatcher and the worker until `shutdown`, or for `seconds`.
async fn run_work(
    app: &App,
    seconds: Option<u64>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    let stop = async {
        match seconds {
            Some(seconds) => tokio::select! {
                biased;
                () = shutdown => {}
                () = tokio::time::sleep(StdDuration::from_secs(seconds)) => {}
            },
            None => shutdown.await,
        }
    };
    app.run_until(stop).await
}

/// The exit code of a command's result, its error printed with its causes, as the operator's
/// commands end.
fn exit(result: Result<(), Error>) -> ExitCode {
    super::Piped::stdout().exit(result.map(|()| ExitCode::SUCCESS))
}

/// Removes the partial copy `path` and its journal files, if any.
fn remove_partial(path: &Path) -> Result<(), Error> {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Configuration {
                    message: format!("cannot remove `{}`: {error}", path.display()),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// A handler's time limit as the flag takes it: a duration more than 0 and at most the
/// configuration's bound, refused naming the flag (clap says which) rather than the settings
/// it fills.
fn time_limit(text: &str) -> Result<Duration, String> {
    let limit: Duration = text
        .parse()
        .map_err(|error: crate::DurationError| error.to_string())?;
    let most = crate::config::MAX_TIME_LIMIT;
    if limit == Duration::ZERO || limit > most {
        return Err(format!(
            "a handler time limit must be more than 0 and at most {most}, not {limit}"
        ));
    }
    Ok(limit)
}
