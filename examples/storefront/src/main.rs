//! The storefront in one binary, on one SQLite file or a PostgreSQL server (`--db`).
//!
//! `storefront` (or `storefront run`) places a batch of orders on the real clock, settles a third,
//! declines a third and leaves the rest to a short payment window, shows progress, and ends with
//! what happened to every order. Run it again: orders an earlier run left open are resumed, their
//! deadlines run after the restart. `storefront lag`, `deadlines` and `dead-letters ..` are the
//! operator's commands.

mod database;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use bounda::{App, Duration};
use clap::{Args, Parser, Subcommand};
use storefront::order::{Item, Order, OrderStatus, PlaceOrder};
use storefront::payment::{DeclinePayment, MarkPaymentProcessing, Payment, SettlePayment};
use storefront::ports::{FakeGateway, FileNotifier, GatewayPort, MemoryNotifier, NotifierPort};

#[derive(Parser)]
#[command(about = "The storefront of bounda, on one SQLite file or a PostgreSQL server")]
struct Cli {
    /// The database: a SQLite file's path, or a PostgreSQL server's address
    /// (`postgres://user:password@host/dbname`) for workers on several machines.
    #[arg(
        long,
        env = "STOREFRONT_DB",
        default_value = "storefront.db",
        global = true
    )]
    db: database::Database,
    /// On PostgreSQL, the schema that holds the tables (created if missing).
    #[arg(
        long,
        env = "STOREFRONT_SCHEMA",
        default_value = "storefront",
        global = true
    )]
    schema: String,
    /// Names this process in the claims it takes (`machine-1/<id>`), so the store shows which
    /// process holds a run.
    #[arg(long, env = "RUNNER_NAME", global = true)]
    runner_name: Option<String>,
    /// How long one handler run may take. A crashed run's claims lapse after twice this, so a
    /// restart after a SIGKILL resumes its work then.
    #[arg(long, env = "HANDLER_TIMEOUT", default_value = "30s", global = true)]
    handler_timeout: Duration,
    /// How many runs a worker takes and commits together: larger batches give more throughput,
    /// a batch of 1 commits each run on its own.
    #[arg(
        long,
        env = "BATCH_SIZE",
        default_value_t = 100,
        global = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    batch_size: u32,
    /// How long the runtime waits before trying a failing store again, doubling each time.
    /// After 5 failures in a row (a read-only file, a full disk) it stops with the cause; a
    /// database server out of reach (restarting, failing over) is waited out, however long.
    #[arg(long, env = "BACKOFF", default_value = "1s", global = true)]
    backoff: Duration,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Places a batch of orders and runs until every open order has ended (the default).
    Run(RunArgs),
    /// Runs the dispatcher and the worker only, until Ctrl-C or `--seconds` have passed.
    Work {
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<u64>,
        #[command(flatten)]
        timing: TimingArgs,
    },
    /// Serves the operator page until Ctrl-C: lag, the deadlines ahead, the dead letters, each
    /// instance's story. Retrying and discarding letters need the token in `PAGE_TOKEN`; without
    /// it the page only reads. It has no login of its own: beyond loopback, serve it behind the
    /// operators' authenticating proxy.
    Serve(ServeArgs),
    /// Copies the database into a new SQLite file: production's data, to preview a deploy on
    /// (`preview`) without touching it. Works while production runs; stop it for a copy of one
    /// instant.
    Copy(bounda::cli::CopyArgs),
    /// Runs this build on a copy `copy` made (`--db copy.db`), on simulated time from the moment
    /// it was taken, with the notifier and the payment gateway replaced by doubles that record
    /// and succeed, and reports what would happen: deadlines fired, commands sent, events
    /// written, letters filed, orders ended, and each call the doubles took. It runs on a copy
    /// in memory, so the file is left as it was for the next build's preview; on any other
    /// database it reads it into memory now, writing nothing to it. Exits 3 when a letter would
    /// be filed or the data does not read through this build.
    Preview {
        #[command(flatten)]
        args: bounda::cli::PreviewArgs,
        #[command(flatten)]
        timing: TimingArgs,
    },
    /// Lists orders from the `order-summary` read model, newest first; with `--customer`, that
    /// customer's orders with how many are open and what they have spent.
    Orders(OrdersArgs),
    #[command(flatten)]
    Operator(bounda::cli::Operator),
}

/// Which orders `orders` lists.
#[derive(Args, Clone)]
struct OrdersArgs {
    /// Only this customer's orders.
    #[arg(long)]
    customer: Option<String>,
    /// Which page of all orders, from 1 (20 per page).
    #[arg(long, default_value_t = 1)]
    page: u64,
}

/// Where and for whom the operator page is served.
#[derive(Args, Clone)]
struct ServeArgs {
    /// Where to listen: loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Host names the page answers to besides loopback's, comma-separated: the name a reverse
    /// proxy passes on. Requests for any other name are refused.
    #[arg(long = "host", env = "PAGE_HOSTS", value_delimiter = ',')]
    hosts: Vec<String>,
    /// Origins whose forms may retry and discard besides the page's own, comma-separated
    /// (`https://ops.example.com`): the address operators open when a proxy rewrites `Host`.
    #[arg(long = "origin", env = "PAGE_ORIGINS", value_delimiter = ',')]
    origins: Vec<String>,
    /// The path to serve the page under (`/ops`), for a proxy that passes on a path of its own;
    /// the root unless told otherwise.
    #[arg(long, env = "PAGE_PATH", default_value = "", value_parser = page_path)]
    path: String,
}

/// A path to serve the page under: segments of letters, digits, `-`, `.`, `_` and `~`.
fn page_path(text: &str) -> Result<String, String> {
    let path = text.trim_matches('/');
    let segment = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    if path.is_empty() || path.split('/').all(segment) {
        Ok(path.to_owned())
    } else {
        Err("segments of letters, digits, `-`, `.`, `_` and `~`, such as `/ops`".to_owned())
    }
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Orders to place.
    #[arg(long, env = "ORDERS", default_value_t = 12)]
    orders: usize,
    #[command(flatten)]
    timing: TimingArgs,
}

/// The timing of the handlers, read by `run` and `work`, the commands that run them.
#[derive(Args, Clone, Copy)]
struct TimingArgs {
    /// How long a customer has to pay.
    #[arg(long, env = "PAYMENT_WINDOW", default_value = PAYMENT_WINDOW)]
    payment_window: Duration,
    /// When the reminder goes.
    #[arg(long, env = "REMINDER_DELAY", default_value = REMINDER_DELAY)]
    reminder_delay: Duration,
}

impl TimingArgs {
    fn timing(self) -> storefront::Timing {
        storefront::Timing {
            payment_window: self.payment_window,
            reminder_delay: self.reminder_delay,
        }
    }
}

/// The payment window, unless told otherwise.
const PAYMENT_WINDOW: &str = "3s";
/// The reminder delay, unless told otherwise.
const REMINDER_DELAY: &str = "1s";

/// The timing of the operator's commands, which read no settings of `run` or `work`: an
/// invalid one in the environment does not stop `lag`, `deadlines` or `dead-letters`.
fn default_timing() -> storefront::Timing {
    storefront::Timing {
        payment_window: const { parsed(PAYMENT_WINDOW) },
        reminder_delay: const { parsed(REMINDER_DELAY) },
    }
}

/// A duration written in this file, checked while compiling.
const fn parsed(text: &str) -> Duration {
    match Duration::parse_const(text) {
        Ok(duration) => duration,
        Err(_) => panic!("a default of `run` is not a duration"),
    }
}

impl Default for RunArgs {
    fn default() -> RunArgs {
        RunArgs::parse_from(["run"])
    }
}

impl Parser for RunArgs {}
impl clap::CommandFactory for RunArgs {
    fn command() -> clap::Command {
        <RunArgs as Args>::augment_args(clap::Command::new("run"))
    }
    fn command_for_update() -> clap::Command {
        <RunArgs as Args>::augment_args_for_update(clap::Command::new("run"))
    }
}

/// How many log lines wait for a slow standard error before more are dropped.
const LOG_LINES_BUFFERED: usize = 10_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // The runtime's logs and spans, to standard error; `RUST_LOG` chooses (warnings by default).
    // A thread of its own writes them, so a slow reader of standard error (a pipe to a busy log
    // shipper) never stops the worker: when its buffer is full, lines are dropped and counted.
    let (writer, _flush_at_exit) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_LINES_BUFFERED)
        .thread_name("storefront-log")
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .init();
    let code = storefront_main().await;
    // Said through the same writer, so a reader that stopped reading cannot hold the exit.
    if dropped.dropped_lines() > 0 {
        tracing::warn!(
            dropped = dropped.dropped_lines(),
            "log lines were dropped: standard error was read too slowly"
        );
    }
    code
}

/// The storefront's command, once logging is set up.
async fn storefront_main() -> ExitCode {
    let mut cli = Cli::parse();
    let command = cli
        .command
        .take()
        .unwrap_or_else(|| Command::Run(RunArgs::default()));
    let timing = match &command {
        Command::Run(args) => args.timing.timing(),
        Command::Work { timing, .. } => timing.timing(),
        Command::Operator(_) | Command::Serve(_) | Command::Orders(_) => default_timing(),
        Command::Copy(args) => return copy(&cli, args).await,
        Command::Preview { args, timing } => {
            return preview(&cli, args.clone(), timing.timing()).await;
        }
    };
    // The signal handlers of the commands that run, installed before anything is opened: a
    // SIGTERM at any moment from here stops them cleanly. An operator's command keeps the
    // default handlers, so Ctrl-C ends it at once.
    let shutdown: Shutdown = match command {
        Command::Operator(_) | Command::Orders(_) => Box::pin(std::future::pending()),
        _ => Box::pin(bounda::shutdown_signal()),
    };
    // An operator's command reads an existing file; it never creates one.
    let existing = matches!(
        command,
        Command::Operator(_) | Command::Serve(_) | Command::Orders(_)
    );
    let app = match build(&cli, existing, timing).await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = match command {
        Command::Operator(command) => return bounda::cli::run(&app, command).await,
        Command::Work { seconds, .. } => work(&app, seconds, shutdown).await,
        Command::Serve(args) => serve(app, args, shutdown).await,
        Command::Run(args) => run(&app, &cli.db, &args, shutdown).await,
        Command::Orders(args) => orders(&app, &args).await,
        Command::Copy(_) | Command::Preview { .. } => unreachable!("answered above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `orders`: the order summaries, brought up to what is stored first.
async fn orders(app: &App, args: &OrdersArgs) -> anyhow::Result<()> {
    use storefront::read::order_summary::OrderSummary;
    let caught = app.catch_up_all().await?;
    if !caught.is_complete() {
        eprintln!(
            "note: {} behind what is stored; `lag` says why",
            caught.behind.join(", ")
        );
    }
    let heading = format!(
        "{:<38} {:<10} {:<10} {:>10} {:>5}  {:<11} {}",
        "order", "customer", "status", "total", "items", "payment", "placed"
    );
    let line = |order: &OrderSummary| {
        format!(
            "{:<38} {:<10} {:<10} {:>10} {:>5}  {:<11} {}",
            order.order_id,
            order.customer_id,
            order.status,
            money(order.total),
            order.item_count,
            order.payment_status.as_deref().unwrap_or("-"),
            order.placed_at
        )
    };
    match &args.customer {
        Some(customer) => {
            let theirs = OrderSummary::by_customer(app, customer).await?;
            println!("{heading}");
            for order in &theirs.orders {
                println!("{}", line(order));
            }
            println!(
                "{} orders, {} open, {} spent",
                theirs.orders.len(),
                theirs.open,
                money(theirs.spent)
            );
        }
        None => {
            let page = OrderSummary::newest(app, args.page, 20).await?;
            println!("{heading}");
            for order in &page.rows {
                println!("{}", line(order));
            }
            println!(
                "page {} of {}, {} orders in all",
                page.page, page.pages, page.total
            );
        }
    }
    Ok(())
}

/// Cents as an amount: `139.00`.
fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// What stops a running command: SIGTERM or Ctrl-C.
type Shutdown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The app on `cli`'s database with its settings; with `existing`, on a database that must be
/// there already.
async fn build(cli: &Cli, existing: bool, timing: storefront::Timing) -> anyhow::Result<App> {
    let store = cli.db.open(existing, &cli.schema).await?;
    let mut config = bounda::config::Config::default();
    config.commands.timeout = cli.handler_timeout;
    config.policies.timeout = cli.handler_timeout;
    config.processes.handler_timeout = cli.handler_timeout;
    config.dispatcher.batch_size = cli.batch_size as usize;
    config.dispatcher.backoff.base_delay = cli.backoff;
    // `NOTIFY_LOG=path` writes each confirmation to a file several processes may share.
    let notifier: NotifierPort = match std::env::var_os("NOTIFY_LOG") {
        Some(path) => Arc::new(FileNotifier::new(path)),
        None => Arc::new(MemoryNotifier::default()),
    };
    let gateway: GatewayPort = Arc::new(FakeGateway::default());
    let mut builder = App::builder_shared(store).config(config);
    if let Some(name) = &cli.runner_name {
        builder = builder.runner_name(name.clone());
    }
    Ok(storefront::app(builder, notifier, gateway, timing)
        .build()
        .await?)
}

/// `copy`: the database, as it is, into a new SQLite file. The copy is written beside it under
/// a `.partial` name and renamed once whole, so a copy cut short is never taken for one.
async fn copy(cli: &Cli, args: &bounda::cli::CopyArgs) -> ExitCode {
    let mut partial = args.to.clone().into_os_string();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let stores = async {
        if args.to.exists() {
            anyhow::bail!("`{}` exists: copy into a new file", args.to.display());
        }
        let from = cli.db.open_as_is(&cli.schema).await?;
        // What an earlier copy cut short left is never a copy.
        remove_partial(&partial)?;
        let to = bounda_sqlite::SqliteStore::open(&partial)?;
        anyhow::Ok((from, to))
    };
    let (from, to) = match stores.await {
        Ok(stores) => stores,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let code = bounda::cli::copy(from.as_ref(), &to, &cli.db.to_string()).await;
    drop(to);
    let finished = match code == ExitCode::SUCCESS {
        true => std::fs::rename(&partial, &args.to).map_err(anyhow::Error::from),
        false => remove_partial(&partial),
    };
    match finished {
        Ok(()) => code,
        Err(error) => {
            eprintln!(
                "error: cannot finish the copy `{}`: {error:#}",
                args.to.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Removes the partial copy `path` and its journal files, if any.
fn remove_partial(path: &std::path::Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(anyhow::Error::new(error)
                    .context(format!("cannot remove `{}`", path.display())));
            }
            _ => {}
        }
    }
    Ok(())
}

/// `preview`: this build on a scratch copy of the copy at `--db`, its ports doubles.
async fn preview(
    cli: &Cli,
    args: bounda::cli::PreviewArgs,
    timing: storefront::Timing,
) -> ExitCode {
    let scratch = async {
        let kept = cli.db.open_as_is(&cli.schema).await?;
        anyhow::Ok(
            bounda_sqlite::SqliteStore::in_memory_copy_of(kept.as_ref(), &cli.db.to_string())
                .await?,
        )
    };
    let scratch = match scratch.await {
        Ok(scratch) => scratch,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    // Doubles that record each call in the report and succeed: nobody is told, nothing charged.
    let calls = bounda::preview::PortCalls::default();
    let double = Arc::new(storefront::ports::Recording::new(calls.clone()));
    let builder =
        storefront::app(App::builder(scratch), double.clone(), double, timing).port(calls);
    bounda::cli::preview(builder, args).await
}

/// Serves the operator page as `args` say until Ctrl-C or SIGTERM.
async fn serve(app: App, args: ServeArgs, shutdown: Shutdown) -> anyhow::Result<()> {
    let token = std::env::var("PAGE_TOKEN")
        .ok()
        .filter(|token| !token.is_empty());
    let writable = token.is_some();
    let tidy = |names: Vec<String>| {
        names
            .into_iter()
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    };
    let path = args.path;
    let options = bounda::page::Options {
        token,
        hosts: tidy(args.hosts),
        origins: tidy(args.origins),
        path: path.clone(),
        metrics: Some(bounda::page::Metrics::install()?),
    };
    let mut page = bounda::page::router(app, options);
    if !path.is_empty() {
        page = axum::Router::new().nest(&format!("/{path}"), page);
    }
    let listen = args.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    println!(
        "operator page on http://{}/{path} ({})",
        listener.local_addr()?,
        if writable {
            "letters can be retried with the token"
        } else {
            "read-only: set PAGE_TOKEN to retry letters"
        }
    );
    axum::serve(listener, page)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Runs the dispatcher and the worker.
async fn work(app: &App, seconds: Option<u64>, shutdown: Shutdown) -> anyhow::Result<()> {
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
    app.run_until(stop).await?;
    Ok(())
}

/// The fates of orders 0, 1, 2, 3, ...: settled, declined, left to expire, settled, ...
const FATES: [Fate; 3] = [Fate::Settle, Fate::Decline, Fate::Ignore];

/// The fate of order `o-<batch>-<n>`; an id of another shape is left alone.
fn fate_of(order_id: &str) -> Fate {
    order_id
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .map_or(Fate::Ignore, |n| FATES[n % 3])
}

/// What the job does to an order's payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Settle,
    Decline,
    Ignore,
}

async fn run(
    app: &App,
    db: &database::Database,
    args: &RunArgs,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    // Orders an earlier run left open: their deadlines run after the restart.
    let resumed: Vec<String> = app
        .pending_deadlines()
        .await?
        .into_iter()
        .filter(|d| d.process == "OrderLifecycle")
        .map(|d| d.instance)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The run's own suffix: the last twelve characters of a fresh id.
    let id = app.next_id();
    let batch = &id[id.len().saturating_sub(12)..];
    println!(
        "storefront on {}: {} orders, payment window {}, {} left open by an earlier run",
        db,
        args.orders,
        args.timing.payment_window,
        resumed.len()
    );
    // A resumed order keeps the fate its number gave it, so one killed half-way through its
    // decline is declined now rather than left to its process timeout.
    let mut orders: BTreeMap<String, Fate> =
        resumed.iter().map(|id| (id.clone(), fate_of(id))).collect();
    for i in 0..args.orders {
        let order_id = format!("o-{batch}-{i:03}");
        let fate = FATES[i % 3];
        let items = vec![Item {
            product_id: "p-1".into(),
            quantity: 1 + i as u32 % 3,
            price: 1_999,
        }];
        app.dispatch(PlaceOrder {
            order_id: order_id.clone(),
            customer_id: format!("c-{i}"),
            items,
        })
        .await
        .map_err(|error| anyhow::Error::new(error).context(format!("cannot place {order_id}")))?;
        orders.insert(order_id, fate);
    }

    let job = {
        let app = app.clone();
        let orders = orders.clone();
        let (payment_window, reminder_delay) =
            (args.timing.payment_window, args.timing.reminder_delay);
        async move {
            let mut acted = std::collections::HashSet::new();
            let mut last_report = tokio::time::Instant::now();
            // What this run schedules (reminders, payment windows) is due before this, and so is
            // the retry of a claim a killed run left (it lapses after twice the handler time
            // limit); the run waits for them rather than leave them behind.
            let lapse = app
                .config()
                .processes
                .handler_timeout
                .checked_mul(2)
                .unwrap_or(payment_window);
            let horizon = app.clock().now() + payment_window + reminder_delay + lapse;
            loop {
                for (order_id, fate) in &orders {
                    if *fate == Fate::Ignore || acted.contains(order_id) {
                        continue;
                    }
                    let Some(payment_id) = payment_of(&app, order_id).await else {
                        continue;
                    };
                    let acted_ok = match fate {
                        Fate::Settle => app.dispatch(SettlePayment { payment_id }).await.is_ok(),
                        _ => {
                            let processing = MarkPaymentProcessing {
                                payment_id: payment_id.clone(),
                            };
                            // A run killed after this step finds the payment processing already.
                            let already = app.load::<Payment>(&payment_id).await.is_ok_and(|p| {
                                p.state.status
                                    == Some(storefront::payment::PaymentStatus::Processing)
                            });
                            (already || app.dispatch(processing).await.is_ok())
                                && app
                                    .dispatch(DeclinePayment {
                                        payment_id,
                                        reason: "card declined".into(),
                                    })
                                    .await
                                    .is_ok()
                        }
                    };
                    if acted_ok {
                        acted.insert(order_id.clone());
                    }
                }
                let counts = statuses(&app, orders.keys()).await;
                let open = counts.get("placed").copied().unwrap_or(0)
                    + counts.get("paying").copied().unwrap_or(0);
                let settled = app.lag().await.is_ok_and(|lag| lag.max_lag == 0);
                let next = app.next_due_at().await.ok().flatten();
                let done = open == 0 && settled && next.is_none_or(|at| at > horizon);
                if last_report.elapsed() >= StdDuration::from_millis(500) || done {
                    println!("  {}; {}", describe(&counts), scheduled(&app, next));
                    last_report = tokio::time::Instant::now();
                }
                if done {
                    return;
                }
                tokio::time::sleep(StdDuration::from_millis(50)).await;
            }
        }
    };
    // A signal stops the app between runs: the run in flight finishes, no claim is left.
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let stop = async {
        tokio::select! {
            biased;
            () = shutdown => {
                interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            () = job => {}
        }
    };
    app.run_until(stop).await?;
    if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        println!("interrupted: run again to resume the open orders");
        return Ok(());
    }

    println!("what happened:");
    for order_id in orders.keys() {
        let order = app.load::<Order>(order_id).await?.state;
        let payment = match payment_of(app, order_id).await {
            Some(id) => Some(app.load::<Payment>(&id).await?),
            None => None,
        };
        let payment = payment.map_or("-".to_owned(), |p| {
            let status = p
                .state
                .status
                .map_or("none".to_owned(), |s| format!("{s:?}"));
            format!("{status}, refund {:?}", p.state.refund).to_lowercase()
        });
        println!(
            "  {order_id}  {:<10} payment {payment}",
            OrderStatus::name(order.status)
        );
    }
    let counts = statuses(app, orders.keys()).await;
    println!(
        "{}; lag {}; {}",
        describe(&counts),
        app.lag().await?.max_lag,
        scheduled(app, app.next_due_at().await?)
    );
    Ok(())
}

/// What is left scheduled: nothing, or when the next run is due.
fn scheduled(app: &App, next: Option<bounda::Instant>) -> String {
    match next {
        None => "nothing scheduled".to_owned(),
        Some(at) => format!(
            "next scheduled run {}",
            bounda::cli::relative(at, app.clock().now())
        ),
    }
}

/// The payment the order's process requested, once it has.
async fn payment_of(app: &App, order_id: &str) -> Option<String> {
    let events = app
        .store()
        .read_stream("process:OrderLifecycle", order_id)
        .await
        .ok()?;
    events.iter().rev().find_map(|e| {
        e.payload
            .get("state")?
            .get("payment_id")?
            .as_str()
            .map(str::to_owned)
    })
}

async fn statuses<'a>(
    app: &App,
    orders: impl Iterator<Item = &'a String>,
) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for order_id in orders {
        let status = app
            .load::<Order>(order_id)
            .await
            .map(|o| o.state.status)
            .unwrap_or(None);
        *counts.entry(OrderStatus::name(status)).or_default() += 1;
    }
    counts
}

fn describe(counts: &BTreeMap<&'static str, usize>) -> String {
    if counts.is_empty() {
        return "no orders".to_owned();
    }
    counts
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect::<Vec<_>>()
        .join(", ")
}
