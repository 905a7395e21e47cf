//! The operator page in a real browser (issue 13): `storefront serve` on a file with orders
//! waiting for payment and one dead letter, read and used through headless Chromium. Each page
//! it sees is kept as a screenshot under `target/tmp/operator-page/`.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bounda::clock::{Clock, SimulatedClock, SystemClock};
use bounda::prelude::*;
use bounda::store::LetterFilter;
use bounda_sqlite::SqliteStore;
use fantoccini::Locator;
use storefront::order::{Item, PlaceOrder};
use storefront::ports::{FakeGateway, GatewayPort, MemoryNotifier, NotifierPort};

mod support;

use support::browser::Browser;

/// The operator's token for the page.
const TOKEN: &str = "s3cret-operator-token";

/// Where the screenshots go: `target/tmp/operator-page/`.
fn artifacts() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("operator-page")
}

/// Orders `o-2`, `o-3` and `o-4` waiting for payment (their deadlines about 6, 12 and 18 hours
/// from now), `o-5`, whose deadlines ran and ended it, and `o-1`, whose lifecycle could not start: the gateway refused its payment intent
/// on every attempt, so its event waits in a dead letter. Placed on a simulated clock that
/// starts a minute ago, so that what it wrote lies in the past of the page's real one.
async fn shop_with_a_letter(db: &Path) {
    let clock = Arc::new(SimulatedClock::at(SystemClock.now() - minutes(1)));
    let gateway = Arc::new(FakeGateway::default());
    let mut app = None;
    // `o-5` has a second to pay: its deadlines run, for the lateness chart, and it ends.
    for (order, window) in [
        ("o-1", hours(6)),
        ("o-2", hours(6)),
        ("o-3", hours(12)),
        ("o-4", hours(18)),
        ("o-5", seconds(1)),
    ] {
        let builder = storefront::app(
            App::builder(SqliteStore::open(db).unwrap()).clock(clock.clone()),
            Arc::new(MemoryNotifier::default()) as NotifierPort,
            gateway.clone() as GatewayPort,
            storefront::Timing {
                payment_window: window,
                reminder_delay: hours(30),
            },
        );
        let shop =
            TestApp::with_app(builder.build().await.unwrap(), clock.clone()).expecting_letters();
        gateway.fail_intents(if order == "o-1" { 100 } else { 0 });
        shop.dispatch(PlaceOrder {
            order_id: order.into(),
            zone: None,
            customer_id: "c-1".into(),
            items: vec![Item {
                product_id: "p-1".into(),
                quantity: 1,
                price: 4_200,
            }],
        })
        .await
        .unwrap();
        // The lifecycle's retries wait a second or two of simulated time.
        shop.advance(seconds(10)).await.unwrap();
        app = Some(shop);
    }
    let app = app.unwrap();
    let letters = app
        .app()
        .dead_letters()
        .count(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters, 1, "o-1's lifecycle failed on every attempt");
    let pending = app.app().pending_deadlines().await.unwrap();
    let payments = pending.iter().filter(|due| due.field == "pay_by");
    assert_eq!(payments.count(), 3, "{pending:?}");
}

/// The hover texts of the timeline's circles.
async fn circles(browser: &Browser) -> Vec<String> {
    let mut titles = Vec::new();
    for circle in browser
        .client()
        .find_all(Locator::Css("#timeline circle"))
        .await
        .unwrap()
    {
        let (_, _, width, height) = circle.rectangle().await.unwrap();
        assert!(width > 0.0 && height > 0.0, "a circle is drawn");
        let title = circle.find(Locator::Css("title")).await.unwrap();
        titles.push(title.prop("textContent").await.unwrap().unwrap_or_default());
    }
    titles.sort();
    titles
}

/// Signs in from the header's link as `name` with `token`.
async fn sign_in(browser: &Browser, name: &str, token: &str) {
    browser.click("#signin-link").await;
    browser
        .type_into("#signin-form input[name=name]", name)
        .await;
    browser
        .type_into("#signin-form input[name=token]", token)
        .await;
    browser.click("#signin-form button").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_sees_the_deadlines_and_retries_the_letter_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    shop_with_a_letter(&db).await;
    let serve = support::Serve::start(&db, &[("PAGE_TOKEN", TOKEN)]);
    // The page answers to loopback and to the name it was given (`--host`), no other.
    assert_eq!(support::http_get(&serve.url, "ops.internal").0, 200);
    assert_eq!(support::http_get(&serve.url, "rebound.example").0, 421);
    let browser = Browser::start().await;
    let shots = artifacts();

    // The overview: the three payment deadlines on the timeline, each with its payment reminder,
    // the letter open.
    browser.open(&serve.url).await;
    let titles = circles(&browser).await;
    assert_eq!(titles.len(), 6, "{titles:?}");
    let pay_by: Vec<&String> = titles.iter().filter(|t| t.contains(" pay_by at")).collect();
    assert_eq!(pay_by.len(), 3, "{titles:?}");
    for (title, order) in pay_by.iter().zip(["o-2", "o-3", "o-4"]) {
        assert!(
            title.starts_with(&format!("OrderLifecycle:{order} pay_by at")),
            "{title}"
        );
    }
    assert!(
        browser
            .text("#timeline h2")
            .await
            .contains("Deadlines in the next 48 hours")
    );
    assert_eq!(browser.text("#letters tr.letter .status").await, "failed");
    // Signed out, the page reads only: no form acts, the header offers to sign in.
    assert!(
        browser
            .text("#letters")
            .await
            .contains("Sign in to act here.")
    );
    // The lag panel, framed, reloading itself.
    let client = browser.client();
    client.enter_frame(0).await.unwrap();
    browser.text_with("#waiting", "max lag 0").await;
    assert!(browser.text("table").await.contains("policies"));
    client.enter_parent_frame().await.unwrap();
    assert!(
        browser
            .text("#letters tr.letter .error")
            .await
            .contains("the gateway is unavailable")
    );
    browser.screenshot(&shots, "overview").await;

    // How late the deadlines ran: o-5's two, on time (the buckets' counting is the router test's).
    let chart = browser.client();
    let late = chart
        .find(fantoccini::Locator::Css("#lateness rect.late-1 title"))
        .await
        .unwrap()
        .prop("textContent")
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(late, "OrderLifecycle: 0 ran 1 s to 1 min late");
    let source = browser.client().source().await.unwrap();
    assert!(
        source.contains("OrderLifecycle: 2 ran within 1 s late"),
        "o-5's two deadlines, on time"
    );
    browser
        .client()
        .find(fantoccini::Locator::Css("#lateness"))
        .await
        .unwrap()
        .screenshot()
        .await
        .map(|png| std::fs::write(shots.join("lateness.png"), png))
        .unwrap()
        .unwrap();

    // Each process's instances counted by status: the failed count leads to the one that
    // failed; soonest due first, the three running orders with their payment deadlines.
    let processes = browser.text("#processes").await;
    assert!(processes.contains("OrderLifecycle"), "{processes}");
    browser
        .click("#processes a[href*='process=OrderLifecycle'][href$='status=failed']")
        .await;
    browser.text_with("#matching", "1 instance matches").await;
    assert!(browser.text("#instances table").await.contains("o-1"));
    browser
        .open(&format!(
            "{}/instances?process=OrderLifecycle&order=soonest",
            serve.url
        ))
        .await;
    browser.text_with("#matching", "3 instances match").await;
    let rows = browser.text("#instances table").await;
    assert!(
        ["o-2", "o-3", "o-4"].iter().all(|id| rows.contains(id)),
        "{rows}"
    );
    browser.screenshot(&shots, "instances").await;
    browser.open(&serve.url).await;

    // The letter leads to its instance's story: the failure that filed it.
    browser.click("#letters tr.letter a.story").await;
    browser
        .text_with("#story h1", "OrderLifecycle o-1: failed")
        .await;
    assert!(
        browser
            .text("#story-letters")
            .await
            .contains("failed: the gateway is unavailable")
    );
    browser.screenshot(&shots, "letter-story").await;
    browser.open(&serve.url).await;

    // Signing in with a wrong token is refused; with the operator's, the session begins and the
    // header names the operator.
    sign_in(&browser, "dana", "not-the-token").await;
    browser.text_with("h1", "Refused").await;
    browser
        .text_with("main", "The token is not the operator's.")
        .await;
    browser.screenshot(&shots, "refused").await;
    browser.open(&serve.url).await;
    browser.click("#signin-link").await;
    browser.text_with("#signin h1", "Sign in").await;
    browser.screenshot(&shots, "signin").await;
    browser.open(&serve.url).await;
    sign_in(&browser, "dana", TOKEN).await;
    browser.text_with("#notice", "Signed in").await;
    browser.text_with("#signed-in strong", "dana").await;
    assert_eq!(browser.text("#letters tr.letter .status").await, "failed");

    // Letters in bulk: the overview leads to a filter and the count it matches, the
    // confirmation before retrying or discarding them all.
    browser.click("#bulk-link").await;
    browser
        .text_with("#matching", "1 open letter matches")
        .await;
    browser.type_into("input[name=error]", "gateway").await;
    browser.click("form.filter button").await;
    browser
        .text_with(
            "#matching",
            "1 open letter matches whose error contains “gateway”",
        )
        .await;
    assert!(browser.text("#bulk").await.contains("Retry all 1"));
    browser.screenshot(&shots, "bulk").await;

    // The session asks the workers to retry them all, in the background: o-1's lifecycle starts
    // with the worker's payment window, and its deadline joins the others.
    let worker = support::worker(&db, &[("PAYMENT_WINDOW", "1h")]);
    browser
        .click("#bulk form[action$='/letters/bulk/retry'] button")
        .await;
    browser
        .text_with("#notice", "The retry of the matching letters started")
        .await;
    let here = browser.client().current_url().await.unwrap();
    assert_eq!(
        (here.path(), here.query()),
        ("/ops", Some("done=bulk-retry-started"))
    );
    let mut open = String::new();
    for _ in 0..100 {
        browser.open(&serve.url).await;
        open = browser.text("#letters").await;
        if open.contains("No open dead letters.") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(open.contains("No open dead letters."), "{open}");
    let titles = circles(&browser).await;
    assert_eq!(titles.len(), 8, "{titles:?}");
    assert!(titles[0].starts_with("OrderLifecycle:o-1 pay_by at"));
    drop(worker);
    browser.screenshot(&shots, "retried").await;

    // The read models, each with its lag; the session rebuilds one beside the live table.
    let models = browser.text("#read-models").await;
    assert!(
        models.contains("order-summary") && models.contains("my-orders"),
        "{models}"
    );
    let form = "#read-models tr.read-model form[action$='/order-summary/rebuild']";
    browser.click(&format!("{form} button")).await;
    browser.text_with("#notice", "The rebuild started").await;
    browser.screenshot(&shots, "read-models").await;

    // Its instance page: the story, the deadline pending, the letter retried.
    browser.click("#timeline svg a").await;
    browser
        .text_with("#story h1", "OrderLifecycle o-1: running")
        .await;
    let here = browser.client().current_url().await.unwrap();
    assert_eq!(here.path(), "/ops/instances/OrderLifecycle/o-1");
    assert!(
        browser
            .text("#story")
            .await
            .contains("started by OrderPlaced")
    );
    assert!(browser.text("#pending").await.contains("pay_by at"));
    assert!(browser.text("#story-letters").await.contains("retried"));
    browser.screenshot(&shots, "instance").await;

    // The search finds an instance by its id.
    browser
        .type_into("header input[name=process]", "OrderLifecycle")
        .await;
    browser.type_into("header input[name=id]", "o-3").await;
    browser.click("header button").await;
    browser
        .text_with("#story h1", "OrderLifecycle o-3: running")
        .await;

    // Its page leads to pausing it: the confirmation says what the pause holds, and pauses in the
    // operator's name; the overview lists the pause, and resumes it through its confirmation.
    browser.click("#pause-links a").await;
    browser
        .text_with("#confirm h1", "Pause instance OrderLifecycle o-3?")
        .await;
    assert!(
        browser
            .text("#confirm")
            .await
            .contains("pending deadlines wait")
    );
    browser
        .type_into("#confirm-form input[name=reason]", "a refund is pending")
        .await;
    browser.screenshot(&shots, "pause-confirm").await;
    browser.click("#confirm-form button").await;
    browser.text_with("#notice", "Paused").await;
    let paused = browser.text("#paused").await;
    assert!(
        paused.contains("instance OrderLifecycle o-3 paused since")
            && paused.contains("by dana: a refund is pending"),
        "{paused}"
    );
    browser.screenshot(&shots, "paused").await;
    browser.click("#paused li.pause a.resume-link").await;
    browser
        .text_with("#confirm h1", "Resume instance OrderLifecycle o-3?")
        .await;
    browser.click("#confirm-form button").await;
    browser.text_with("#notice", "Resumed").await;
    assert!(
        browser
            .text("main")
            .await
            .contains("Resumed: what waited runs in order")
    );

    // The overview leads to pausing a whole process, and a policy, each resumed from its list.
    browser.click("#processes tr.process a.pause-link").await;
    browser
        .text_with("#confirm h1", "Pause process OrderLifecycle?")
        .await;
    let holds = browser.text("#confirm").await;
    assert!(
        holds.contains("running instances: their events and deadlines wait."),
        "{holds}"
    );
    browser
        .type_into("#confirm-form input[name=reason]", "the gateway is down")
        .await;
    browser.click("#confirm-form button").await;
    browser.text_with("#notice", "Paused").await;
    let processes = browser.text("#processes").await;
    assert!(processes.contains("paused by dana"), "{processes}");
    browser.click("#policies tr.policy a.pause-link").await;
    browser.text_with("#confirm h1", "Pause policy").await;
    browser.click("#confirm-form button").await;
    browser.text_with("#notice", "Paused").await;
    let paused = browser.text("#paused").await;
    assert!(
        paused.contains("process OrderLifecycle paused since")
            && paused.contains("by dana: the gateway is down")
            && paused.contains("policy "),
        "{paused}"
    );
    browser.screenshot(&shots, "paused-from-overview").await;
    for _ in 0..2 {
        browser.click("#paused li.pause a.resume-link").await;
        browser.text_with("#confirm h1", "Resume").await;
        browser.click("#confirm-form button").await;
        browser.text_with("#notice", "Resumed").await;
    }
    assert!(browser.text("main").await.contains("Resumed"));

    // Signing out ends the session: the forms are gone.
    browser.click("#signed-in button").await;
    browser.text_with("#notice", "Signed out.").await;
    assert!(browser.text("header").await.contains("Sign in"));
    browser.close().await;
}
