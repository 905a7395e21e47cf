//! What the storefront's process tests share: reading back what happened to the orders, the
//! confirmation log the worker processes write, and waiting for a process.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test binary uses part of it; a failed expectation is a panic"
)]

pub mod browser;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use bounda::App;
use bounda::store::LetterFilter;
use storefront::order::{Order, OrderStatus};

/// The storefront on `store` as the worker processes of these tests run it (a payment window of
/// 2 s, a reminder after 1 s), for placing orders and reading back what happened.
pub async fn shop(store: impl bounda::store::Store + 'static) -> App {
    let notifier: storefront::ports::NotifierPort =
        std::sync::Arc::new(storefront::ports::MemoryNotifier::default());
    let gateway: storefront::ports::GatewayPort =
        std::sync::Arc::new(storefront::ports::FakeGateway::default());
    let timing = storefront::Timing {
        payment_window: bounda::seconds(2),
        reminder_delay: bounda::seconds(1),
    };
    storefront::app(App::builder(store), notifier, gateway, timing)
        .build()
        .await
        .unwrap()
}

/// Every order in the store, with its status.
pub async fn orders(app: &App) -> BTreeMap<String, Option<OrderStatus>> {
    let mut orders = BTreeMap::new();
    let mut after = 0;
    loop {
        let events = app.store().read_all(after, 500).await.unwrap();
        let Some(last) = events.last() else { break };
        after = last.position;
        for event in events.iter().filter(|e| e.event_type == "OrderPlaced") {
            let status = app
                .load::<Order>(&event.aggregate_id)
                .await
                .unwrap()
                .state
                .status;
            orders.insert(event.aggregate_id.clone(), status);
        }
    }
    orders
}

/// The confirmation log: order → the keys it was confirmed under, and the processes that did it.
pub fn log(path: &Path) -> (HashMap<String, Vec<String>>, HashSet<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut by_order: HashMap<String, Vec<String>> = HashMap::new();
    let mut pids = HashSet::new();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (order, key, pid) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        by_order
            .entry(order.to_owned())
            .or_default()
            .push(key.to_owned());
        pids.insert(pid.to_owned());
    }
    (by_order, pids)
}

/// Sends `child` `signal` (`-TERM`, `-INT`), as a service manager or a terminal would, and
/// answers how it exited, within 30 s.
pub fn signalled(child: std::process::Child, signal: &str) -> std::process::ExitStatus {
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {signal}");
    finished_within(child, 30)
}

/// Waits for `child` to exit; one still running after `seconds` is killed and fails the test.
pub fn finished_within(mut child: std::process::Child, seconds: u64) -> std::process::ExitStatus {
    let start = StdInstant::now();
    while start.elapsed() < StdDuration::from_secs(seconds) {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    child.kill().unwrap();
    panic!("still running after {seconds} s");
}

/// How many confirmations each worker process sent.
pub fn log_by_pid(path: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        *counts
            .entry(line.rsplit(' ').next().unwrap().to_owned())
            .or_default() += 1;
    }
    counts
}

/// How often each (instance, field, moment) deadline ran.
pub async fn deadline_runs(app: &App, instance: &str) -> HashMap<(String, String), usize> {
    let mut runs = HashMap::new();
    for event in app
        .store()
        .read_stream("process:OrderLifecycle", instance)
        .await
        .unwrap()
    {
        if event.event_type == "ProcessDeadlineReached" || event.event_type == "ProcessTimedOut" {
            let field = event.payload["field"]
                .as_str()
                .unwrap_or("timeout")
                .to_owned();
            let at = event.payload["at"].as_str().unwrap().to_owned();
            *runs.entry((field, at)).or_default() += 1;
        }
    }
    runs
}

/// How often a confirmation may go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Once: no run was taken over.
    Once,
    /// Again under the same key: a worker cut off after sending it could not commit, and the one
    /// that took the run over sent it again (the provider drops the repeat by its key).
    SameKey,
}

/// What must hold once workers have run `count` orders nobody pays: every order placed,
/// cancelled by its deadline with one `OrderCancelled`, confirmed as `sent` says (the
/// confirmation log at `log_path`), each deadline reached once; nothing lagging, lettered or
/// left scheduled. Returns how many deadlines ran.
pub async fn each_order_expired_once(
    app: &App,
    log_path: &Path,
    count: usize,
    sent: Sent,
) -> usize {
    let orders = orders(app).await;
    assert_eq!(orders.len(), count, "every order placed");
    assert!(
        orders.values().all(|s| *s == Some(OrderStatus::Cancelled)),
        "every order expired: {orders:?}"
    );
    let (confirmed, _) = log(log_path);
    assert_eq!(confirmed.len(), count, "every order confirmed");
    match sent {
        Sent::Once => {
            let twice: Vec<_> = confirmed
                .iter()
                .filter(|(_, keys)| keys.len() != 1)
                .collect();
            assert!(twice.is_empty(), "confirmed twice: {twice:?}");
        }
        Sent::SameKey => {
            let keys: Vec<_> = confirmed
                .iter()
                .filter(|(_, keys)| keys.iter().any(|key| *key != keys[0]))
                .collect();
            assert!(keys.is_empty(), "confirmed under two keys: {keys:?}");
        }
    }
    let mut deadlines = 0;
    for order in orders.keys() {
        let cancelled = app
            .store()
            .read_stream("Order", order)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.event_type == "OrderCancelled")
            .count();
        assert_eq!(cancelled, 1, "{order} ended once");
        let runs = deadline_runs(app, order).await;
        let mut fields: Vec<&str> = runs.keys().map(|(field, _)| field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            ["pay_by", "payment_reminder"],
            "{order}: reminded, then given up on: {runs:?}"
        );
        assert!(
            runs.values().all(|n| *n == 1),
            "{order} ran a deadline twice: {runs:?}"
        );
        deadlines += runs.len();
    }
    assert_eq!(app.lag().await.unwrap().max_lag, 0, "no event left behind");
    assert_eq!(
        app.dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0,
        "no dead letters"
    );
    assert_eq!(
        app.next_due_at().await.unwrap(),
        None,
        "nothing left scheduled"
    );
    deadlines
}

/// `storefront serve` on `db` with `env`, on a free port, for host name `ops.internal` too,
/// under `/ops`; stopped when dropped.
pub struct Serve {
    _child: Running,
    /// The page's address: `http://127.0.0.1:<port>/ops`.
    pub url: String,
}

impl Serve {
    pub fn start(db: &Path, env: &[(&str, &str)]) -> Serve {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_storefront"))
            .args(["serve", "--listen", "127.0.0.1:0", "--host", "ops.internal"])
            // Under a path, as behind a proxy that passes one on: every link must keep it.
            .args(["--path", "/ops"])
            .env("BOUNDA_DB", db)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "operator page on http://127.0.0.1:PORT/ops (...)"
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("serve did not say where it listens: {line:?}"))
            .to_owned();
        Serve {
            _child: Running(child),
            url,
        }
    }
}

/// A child process of the storefront's binary, killed when dropped.
pub struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `storefront work` on `db` with `env`, its output left out; stopped when dropped.
pub fn worker(db: &Path, env: &[(&str, &str)]) -> Running {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_storefront"))
        .arg("work")
        .env("BOUNDA_DB", db)
        .env("RUST_LOG", "off")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    Running(child)
}

/// The status and body of a GET of `url` for host name `host`.
pub fn http_get(url: &str, host: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (address, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, body.to_owned())
}

/// The order these tests place: `order_id`, one item of 1.00, for customer `c`.
pub fn order(order_id: &str) -> storefront::order::PlaceOrder {
    storefront::order::PlaceOrder {
        zone: None,
        order_id: order_id.to_owned(),
        customer_id: "c".into(),
        items: vec![storefront::order::Item {
            product_id: "p".into(),
            quantity: 1,
            price: 100,
        }],
    }
}
