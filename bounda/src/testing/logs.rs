//! A test's logs: every warning and error the runtime logs while a test runs is either one the
//! test expects or a failure of the test, so a scenario cannot grow noise, or a failure that is
//! only logged, without a test saying so.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Captures the warnings and errors logged on this thread while it lives, and fails the test
/// when it is dropped if one was not expected, or if an expected one never came.
///
/// It sees the lines logged on the thread that made it, which a `#[tokio::test]` on its default
/// current-thread runtime runs every task on: hold it for the whole test, beside the
/// [`TestApp`](crate::testing::TestApp). It makes its subscriber the process's global one, unless
/// the test binary set one already; then it is this thread's.
///
/// ```
/// use bounda::testing::Logs;
/// use bounda::testing::Level;
///
/// let logs = Logs::check();
/// logs.expect(Level::WARN, "gateway unavailable");
/// tracing::warn!("handler failed: gateway unavailable");
/// assert_eq!(logs.seen().len(), 1);
/// // Dropped here: every line was expected, and every expectation met.
/// ```
#[must_use = "the check lasts as long as the value: hold it for the test"]
pub struct Logs {
    lines: Lines,
    expected: Mutex<Vec<Expected>>,
    /// The thread's own subscriber, when another global one was set before.
    _guard: Option<tracing::subscriber::DefaultGuard>,
}

/// The lines one check keeps.
type Lines = Arc<Mutex<Vec<Line>>>;

thread_local! {
    /// The checks alive on this thread, the innermost last: a line goes to that one.
    static CHECKS: std::cell::RefCell<Vec<Lines>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether the capturing subscriber is the process's global one.
static GLOBAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// A warning or an error that was logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `WARN` or `ERROR`.
    pub level: Level,
    /// The module (or target) that logged it.
    pub target: String,
    /// Its message, then its other fields as `name=value`.
    pub text: String,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.level, self.target, self.text)
    }
}

/// Lines a test expects: at `level`, holding `contains`, at least once.
#[derive(Debug)]
struct Expected {
    level: Level,
    contains: String,
}

impl Expected {
    fn matches(&self, line: &Line) -> bool {
        line.level == self.level && line.text.contains(&self.contains)
    }
}

impl Logs {
    /// Starts checking this thread's warnings and errors.
    pub fn check() -> Logs {
        // One global subscriber, set once, sends each line to the check of the thread that logs
        // it. A subscriber of the thread's own would miss lines: tests on other threads that
        // log at the same moment can make `tracing` cache a line's site as wanted by nobody.
        let global = *GLOBAL.get_or_init(|| {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
                .is_ok()
        });
        let lines: Lines = Arc::new(Mutex::new(Vec::new()));
        CHECKS.with(|checks| checks.borrow_mut().push(Arc::clone(&lines)));
        let guard = (!global).then(|| {
            tracing::subscriber::set_default(tracing_subscriber::registry().with(Capture))
        });
        Logs {
            lines,
            expected: Mutex::new(Vec::new()),
            _guard: guard,
        }
    }

    /// Expects lines at `level` (`WARN` or `ERROR`) whose message or fields hold `contains`: any
    /// number of them, at least one.
    pub fn expect(&self, level: Level, contains: &str) -> &Logs {
        lock(&self.expected).push(Expected {
            level,
            contains: contains.to_owned(),
        });
        self
    }

    /// Every warning and error logged so far, expected or not, in order.
    pub fn seen(&self) -> Vec<Line> {
        lock(&self.lines).clone()
    }

    /// What is wrong so far: the lines no expectation matches, and the expectations no line met.
    pub fn problems(&self) -> Vec<String> {
        let lines = lock(&self.lines);
        let expected = lock(&self.expected);
        let unexpected = lines
            .iter()
            .filter(|line| !expected.iter().any(|e| e.matches(line)))
            .map(|line| format!("unexpected: {line}"));
        let unmet = expected
            .iter()
            .filter(|e| !lines.iter().any(|line| e.matches(line)))
            .map(|e| {
                format!(
                    "expected but not logged: {} holding {:?}",
                    e.level, e.contains
                )
            });
        unexpected.chain(unmet).collect()
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        CHECKS.with(|checks| {
            checks
                .borrow_mut()
                .retain(|lines| !Arc::ptr_eq(lines, &self.lines));
        });
        // A test already failing says why itself.
        if std::thread::panicking() {
            return;
        }
        let problems = self.problems();
        if !problems.is_empty() {
            panic!("the test's logs:\n  {}", problems.join("\n  "));
        }
    }
}

impl std::fmt::Debug for Logs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logs")
            .field("seen", &*lock(&self.lines))
            .field("expected", &*lock(&self.expected))
            .finish()
    }
}

/// A lock whose holder panicked still holds the lines it had.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The layer that keeps the warnings and errors of threads with a check.
struct Capture;

/// The innermost check of this thread, if any.
fn current() -> Option<Lines> {
    CHECKS
        .try_with(|checks| checks.borrow().last().cloned())
        .ok()
        .flatten()
}

impl<S: Subscriber> Layer<S> for Capture {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // Whether a line is wanted depends on the thread that logs it: asked each time.
        match *metadata.level() <= Level::WARN && metadata.is_event() {
            true => tracing::subscriber::Interest::sometimes(),
            false => tracing::subscriber::Interest::never(),
        }
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>, _cx: Context<'_, S>) -> bool {
        *metadata.level() <= Level::WARN && metadata.is_event() && current().is_some()
    }

    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let level = *event.metadata().level();
        let Some(lines) = current().filter(|_| level <= Level::WARN) else {
            return;
        };
        let mut text = Text::default();
        event.record(&mut text);
        lock(&lines).push(Line {
            level,
            target: event.metadata().target().to_owned(),
            text: text.finish(),
        });
    }
}

/// An event's message and fields, as text.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Text {
    fn finish(self) -> String {
        match (self.message.is_empty(), self.fields.is_empty()) {
            (_, true) => self.message,
            (true, false) => self.fields,
            (false, false) => format!("{} {}", self.message, self.fields),
        }
    }
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let gap = if self.fields.is_empty() { "" } else { " " };
            let _ = write!(self.fields, "{gap}{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let gap = if self.fields.is_empty() { "" } else { " " };
            let _ = write!(self.fields, "{gap}{}={value}", field.name());
        }
    }
}
