//! The storefront in one binary, on one SQLite file or a PostgreSQL server (`--db`).
//!
//! `storefront` (or `storefront run`) places a batch of orders on the real clock, settles a third,
//! declines a third and leaves the rest to a short payment window, shows progress, and ends with
//! what happened to every order. Run it again: orders an earlier run left open are resumed, their
//! deadlines run after the restart. `storefront lag`, `deadlines` and `dead-letters ..` are the
//! operator's commands.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use bounda::cli::{Service, ServiceArgs, ServiceCommand};
use bounda::store::{Address, Opening};
use bounda::{App, Duration};
use clap::{Args, Parser, Subcommand};
use storefront::order::{Item, Order, OrderStatus, PlaceOrder};
use storefront::payment::{DeclinePayment, MarkPaymentProcessing, Payment, SettlePayment};
use storefront::ports::{FakeGateway, FileNotifier, MemoryNotifier, NotifierPort, Recording};

#[derive(Parser)]
#[command(
    name = "storefront",
    about = "The storefront of bounda, on one SQLite file or a PostgreSQL server"
)]
struct Cli {
    #[command(flatten)]
    service: ServiceArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Places a batch of orders and runs until every open order has ended (the default).
    Run(RunArgs),
    /// Lists orders from the `order-summary` read model, newest first; with `--customer`, that
    /// customer's orders with how many are open and what they have spent.
    Orders(OrdersArgs),
    #[command(flatten)]
    Service(ServiceCommand),
}

/// Which orders `orders` lists.
#[derive(Args, Clone)]
struct OrdersArgs {
    /// Only this customer's orders.
    #[arg(long)]
    customer: Option<String>,
    /// Which page of all orders, from 1 (20 per page).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    page: u64,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Orders to place.
    #[arg(long, env = "ORDERS", default_value_t = 12)]
    orders: usize,
    /// How long a customer has to pay: `PAYMENT_WINDOW`, or 3 s, unless given here.
    #[arg(long)]
    payment_window: Option<Duration>,
    /// When the reminder goes: `REMINDER_DELAY`, or 1 s, unless given here.
    #[arg(long)]
    reminder_delay: Option<Duration>,
}

/// The payment window, unless told otherwise.
const PAYMENT_WINDOW: &str = "3s";
/// The reminder delay, unless told otherwise.
const REMINDER_DELAY: &str = "1s";

/// The timing of the handlers for `run`, `work` and `preview`, which run them: `PAYMENT_WINDOW`
/// and `REMINDER_DELAY`, or the defaults. The operator's commands read neither, so an invalid
/// one in the environment does not stop `lag`, `deadlines` or `dead-letters`.
fn env_timing() -> Result<storefront::Timing, bounda::DurationError> {
    let default = default_timing();
    Ok(storefront::Timing {
        payment_window: bounda::env_duration("PAYMENT_WINDOW", default.payment_window)?,
        reminder_delay: bounda::env_duration("REMINDER_DELAY", default.reminder_delay)?,
    })
}

/// The defaults of `run`'s timing, checked while compiling.
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

/// The storefront as a service on `timing`: its store a file or a server, its notifier a file
/// several processes may share (`NOTIFY_LOG=path`) or memory, its gateway a fake, and, given
/// `NATS_URL`, a relay publishing every event it stores to the JetStream stream `STOREFRONT`
/// (subject `storefront.<type>`); a preview's ports doubles that record each call and succeed,
/// and it publishes nothing.
fn service(timing: storefront::Timing) -> Service {
    Service::new("storefront", bounda_postgres::Servers(bounda_sqlite::Files))
        .app(move |builder| {
            let notifier: NotifierPort = match std::env::var_os("NOTIFY_LOG") {
                Some(path) => Arc::new(FileNotifier::new(path)),
                None => Arc::new(MemoryNotifier::default()),
            };
            let builder =
                storefront::app(builder, notifier, Arc::new(FakeGateway::default()), timing);
            match std::env::var("NATS_URL") {
                Ok(url) if !url.is_empty() => builder.relay(relay(&url)),
                _ => builder,
            }
        })
        .preview(move |builder, calls| {
            let double = Arc::new(Recording::new(calls));
            storefront::app(builder, double.clone(), double, timing)
        })
}

/// The relay of every event to the JetStream stream `STOREFRONT` on the server at `url`.
fn relay(url: &str) -> bounda::relay::Relay {
    let sink = bounda_nats::JetStream::new(url, "STOREFRONT", "storefront");
    bounda::relay::Relay::new("storefront-events", sink).source("https://storefront.example")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _logging = bounda::cli::Logging::install("storefront");
    let cli = Cli::parse();
    let command = cli
        .command
        .unwrap_or_else(|| Command::Run(RunArgs::default()));
    let runs_handlers = matches!(
        command,
        Command::Run(_) | Command::Service(ServiceCommand::Work(_) | ServiceCommand::Preview(_))
    );
    let mut timing = match runs_handlers {
        false => default_timing(),
        true => match env_timing() {
            Ok(timing) => timing,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        },
    };
    if let Command::Run(args) = &command {
        timing.payment_window = args.payment_window.unwrap_or(timing.payment_window);
        timing.reminder_delay = args.reminder_delay.unwrap_or(timing.reminder_delay);
    }
    let service = service(timing);
    let result = match command {
        Command::Service(command) => return service.run(&cli.service, command).await,
        Command::Run(args) => run(&service, &cli.service, &args, timing).await,
        Command::Orders(args) => match service.open(&cli.service, Opening::Existing).await {
            Ok(app) => orders(&app, &args).await,
            Err(error) => Err(error.into()),
        },
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

/// The fates of orders 0, 1, 2, 3, ...: settled, declined, left to expire, settled, ...
const FATES: [Fate; 3] = [Fate::Settle, Fate::Decline, Fate::Ignore];

/// Where the demo's customers live: each order's payment reminder goes at 09:00 there the day
/// after (or before its window closes, when that comes first).
const ZONES: [&str; 4] = [
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
];

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

/// `run`: places the orders, acts on their payments as their fates say, and runs until every
/// open order has ended, or until SIGTERM or Ctrl-C.
async fn run(
    service: &Service,
    options: &ServiceArgs,
    args: &RunArgs,
    timing: storefront::Timing,
) -> anyhow::Result<()> {
    // Installed before anything is opened: a SIGTERM from here stops cleanly, whether it comes
    // while orders are placed or while they run.
    let signal = bounda::shutdown_signal();
    let (stop_asked, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signal.await;
        let _ = stop_asked.send(true);
    });
    let asked = |stopping: &tokio::sync::watch::Receiver<bool>| *stopping.borrow();
    let app = &service.open(options, Opening::Create).await?;
    let db: Address = service.address(options);
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
        timing.payment_window,
        resumed.len()
    );
    // A resumed order keeps the fate its number gave it, so one killed half-way through its
    // decline is declined now rather than left to its process timeout.
    let mut orders: BTreeMap<String, Fate> =
        resumed.iter().map(|id| (id.clone(), fate_of(id))).collect();
    for i in 0..args.orders {
        // Each order is placed whole or not at all: stopping between two leaves what was
        // placed to run after a restart. A store that answers at once never makes this loop
        // wait, so it yields for the signal to come through.
        tokio::task::yield_now().await;
        if asked(&stopping) {
            println!(
                "interrupted after placing {i} of {} orders: run again to resume the open orders",
                args.orders
            );
            return Ok(());
        }
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
            zone: Some(ZONES[i % ZONES.len()].to_owned()),
        })
        .await
        .map_err(|error| anyhow::Error::new(error).context(format!("cannot place {order_id}")))?;
        orders.insert(order_id, fate);
    }

    let job = {
        let app = app.clone();
        let orders = orders.clone();
        let (payment_window, reminder_delay) = (timing.payment_window, timing.reminder_delay);
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
    let mut stopping = stopping.clone();
    let stop = async {
        tokio::select! {
            biased;
            _ = stopping.wait_for(|asked| *asked) => {
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
