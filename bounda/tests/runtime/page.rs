//! The operator page (issue 13), through its router: the overview shows lag, the timeline and
//! the letters; an instance page tells its story; everything from payloads is escaped; letters
//! are retried only with the token and from the page's own origin.

#![cfg(feature = "page")]
#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::clinic;
use crate::support;
use crate::support::page::*;

use std::sync::Mutex;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use bounda::page::{Options, router};
use bounda::prelude::*;
use support::storefront::*;
use tower::ServiceExt;

/// Orders whose mail the server refuses: the policy fails for them. Each test has its own order.
static HEALED: Mutex<Vec<String>> = Mutex::new(Vec::new());

const SCRIPT: &str = "<script>alert('owned')</script>";

#[policy]
async fn mail_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    if !HEALED.lock().unwrap().contains(&cx.event().order_id) {
        anyhow::bail!("the mail server said {SCRIPT}");
    }
    Ok(())
}

/// An app with order `order_id`, whose process waits for its reminder, and its letter.
async fn shop(order_id: &str) -> TestApp {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>()
            .policy::<MailOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: order_id.into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    app
}

async fn letter_status(app: &TestApp) -> (String, String) {
    let letters = support::letters(app).await;
    (letters[0].id.clone(), letters[0].status.as_str().to_owned())
}

#[tokio::test]
async fn the_overview_shows_lag_the_timeline_and_letters_escaped_under_a_strict_policy() {
    let app = shop("o-1").await;
    let (status, html, policy) = get(&app, None, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(
        !policy.contains("script-src"),
        "no script may run: {policy}"
    );
    assert!(
        html.contains(r#"<iframe class="panel" src="/lag""#),
        "the lag panel, framed: {html}"
    );
    // The reminder (24 h) of o-1; its payment deadline (72 h) is beyond the window.
    assert!(html.contains("OrderPayment · next_reminder"), "{html}");
    assert!(
        html.contains(r#"href="/instances/OrderPayment/o-1""#),
        "{html}"
    );
    assert!(
        html.contains("1 shown; more after them"),
        "the reminder; the payment deadline and the timeout come later: {html}"
    );
    assert!(html.contains("mail_on_order_placed"), "{html}");
    assert!(
        !html.contains(SCRIPT),
        "a payload's markup is not the page's"
    );
    assert!(
        html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"),
        "shown, escaped: {html}"
    );
    assert!(html.contains("Read-only"), "{html}");

    // Another window: a week holds the payment deadline (72 h) too; an unknown one is the default.
    assert!(
        html.contains(r#"<a href="/?window=7d">7 days</a>"#),
        "{html}"
    );
    let (_, html, _) = get(&app, None, "/?window=7d").await;
    assert!(html.contains("Deadlines in the next 7 days"), "{html}");
    assert!(html.contains("OrderPayment · payment_deadline"), "{html}");
    assert!(html.contains("2 shown; more after them"), "{html}");
    let (_, html, _) = get(&app, None, "/?window=1y").await;
    assert!(html.contains("Deadlines in the next 48 hours"), "{html}");
    // Issue 44: a window for deadlines minutes apart.
    assert!(html.contains(r#"<a href="/?window=1h">hour</a>"#), "{html}");
    let (_, html, _) = get(&app, None, "/?window=1h").await;
    assert!(html.contains("Deadlines in the next hour"), "{html}");
}

// The lag refreshes by itself, also while the overview waits for a token to be typed: it is a
// panel of its own, which only the page's own overview may frame.
#[tokio::test]
async fn the_lag_panel_reloads_itself_and_only_the_page_may_frame_it() {
    let app = shop("o-lag").await;
    let (status, html, policy) = get(&app, Some("s3cret-operator-token"), "/lag").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(r#"<meta http-equiv="refresh" content="5">"#),
        "{html}"
    );
    assert!(html.contains("policies"), "{html}");
    assert!(html.contains("max lag 0"), "{html}");
    assert!(policy.contains("frame-ancestors 'self'"), "{policy}");
    assert!(!policy.contains("script-src"), "{policy}");
    let (_, html, policy) = get(&app, Some("s3cret-operator-token"), "/").await;
    assert!(
        html.contains(r#"http-equiv="refresh""#),
        "signed out, the overview reloads itself: {html}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let desk = Desk::signed_in(&app, "s3cret-operator-token", "erin").await;
    let html = desk.get("/").await.body;
    assert!(
        !html.contains(r#"http-equiv="refresh""#),
        "signed in, a form may be typed into: the overview holds still"
    );
    assert!(policy.contains("frame-src 'self'"), "{policy}");
}

#[tokio::test]
async fn an_instance_page_tells_its_story_and_an_unknown_one_is_a_404() {
    let app = shop("o-1").await;
    let (status, html, _) = get(&app, None, "/instances/OrderPayment/o-1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("started by OrderPlaced Order:o-1"), "{html}");
    assert!(html.contains("next_reminder set to"), "{html}");
    let (status, _, _) = get(&app, None, "/instances/OrderPayment/o-9").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, html, _) = get(&app, None, "/instances/Nope/o-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        html.contains("OrderPayment"),
        "names the app's processes: {html}"
    );
}

// Issue 24: a letter is retried only in a signed-in session, with the form's own token, from the
// page's own origin.
#[tokio::test]
async fn a_letter_is_retried_only_in_a_session_with_its_forms_token_from_the_pages_origin() {
    let app = shop("o-retry").await;
    let (id, status) = letter_status(&app).await;
    assert_eq!(status, "failed");
    let retry = format!("/letters/{id}/retry");

    let reader = Desk::new(&app, Options::default());
    let got = reader.post(&retry, "csrf=anything", SAME).await;
    assert_eq!(
        got.status,
        StatusCode::FORBIDDEN,
        "no token: the page only reads"
    );
    assert!(got.body.contains("only reads"), "{}", got.body);
    let stranger = Desk::new(
        &app,
        Options {
            token: Some("s3cret-operator-token".into()),
            ..Options::default()
        },
    );
    let got = stranger.post(&retry, "csrf=anything", SAME).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "not signed in");
    assert!(got.body.contains("Sign in first"), "{}", got.body);

    let desk = Desk::signed_in(&app, "s3cret-operator-token", "erin").await;
    let token = desk.form_token("/", &retry).await;
    let got = desk.post(&retry, "csrf=guess", SAME).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "a made-up form token");
    let discard_token = desk
        .form_token("/", &format!("/letters/{id}/discard"))
        .await;
    let got = desk
        .post(&retry, &format!("csrf={discard_token}"), SAME)
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "another form's token");
    let got = desk
        .post(
            &retry,
            &format!("csrf={token}"),
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "another site's form");
    let explode = format!("/letters/{id}/explode");
    let got = desk.post(&explode, &format!("csrf={token}"), SAME).await;
    assert_eq!(got.status, StatusCode::NOT_FOUND, "no such action");
    assert_eq!(letter_status(&app).await.1, "failed", "nothing ran");

    HEALED.lock().unwrap().push("o-retry".into());
    let got = support::beside_worker(&app, desk.submit("/", &retry, "")).await;
    assert_eq!(got.status, StatusCode::SEE_OTHER);
    assert_eq!(got.location, "/?done=retried");
    assert_eq!(letter_status(&app).await.1, "retried");
}

// Issue 24: signing in takes the token once, with the operator's name; the session is a cookie
// that is signed, HttpOnly, SameSite=Strict and expiring, which another token's page does not
// read; signing out clears it from the browser (a copied cookie lasts until it expires, or
// until a new token).
#[tokio::test]
async fn an_operator_signs_in_once_and_the_session_expires_or_ends() {
    let app = shop("o-session").await;
    let mut desk = Desk::new(&app, options("s3cret-operator-token"));
    let overview = desk.get("/").await.body;
    assert!(
        overview.contains(r#"id="signin-link" href="/signin""#),
        "{overview}"
    );
    assert!(
        !overview.contains(r#"name="csrf""#),
        "no forms before signing in"
    );
    let form = desk.get("/signin").await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.body.contains(r#"id="signin-form""#), "{}", form.body);

    let wrong = desk.sign_in("/signin", SAME, "erin", "guess").await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert!(wrong.cookie.is_empty() && desk.cookie.is_none());
    let nameless = desk
        .sign_in("/signin", SAME, "+", "s3cret-operator-token")
        .await;
    assert_eq!(nameless.status, StatusCode::BAD_REQUEST, "a name is needed");
    let elsewhere = desk
        .post(
            "/signin",
            "name=erin&token=s3cret-operator-token",
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(
        elsewhere.status,
        StatusCode::FORBIDDEN,
        "another site's form"
    );

    let signed = desk
        .sign_in("/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    assert_eq!(
        (signed.status, signed.location.as_str()),
        (StatusCode::SEE_OTHER, "/?done=signed-in")
    );
    let cookie = &signed.cookie;
    for attribute in [
        "bounda_session=",
        "Path=/",
        "Max-Age=43200",
        "HttpOnly",
        "SameSite=Strict",
    ] {
        assert!(cookie.contains(attribute), "{attribute}: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "served over plain HTTP: {cookie}"
    );
    let overview = desk.get("/?done=signed-in").await.body;
    assert!(
        overview.contains("signed in as</span> <strong>erin</strong>"),
        "{overview}"
    );
    assert!(overview.contains(r#"name="csrf""#), "{overview}");

    // Another token's page reads no session of this one's.
    let other = Desk {
        page: router(app.app().clone(), options("other-operator-token")),
        cookie: desk.cookie.clone(),
    };
    assert!(!other.get("/").await.body.contains("signed in as"));

    let out = desk.submit("/", "/signout", "").await;
    assert_eq!(out.location, "/?done=signed-out");
    assert!(
        out.cookie.contains("bounda_session=;") && out.cookie.contains("Max-Age=0"),
        "{}",
        out.cookie
    );

    // A session lasts twelve hours.
    desk.sign_in("/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    app.clock().advance(hours(12) - seconds(1));
    assert!(desk.get("/").await.body.contains("signed in as"));
    app.clock().advance(seconds(1));
    let expired = desk.get("/").await.body;
    assert!(!expired.contains("signed in as"), "{expired}");

    // Signed in through an HTTPS proxy, the cookie is marked Secure.
    let mut secure = Desk::new(
        &app,
        Options {
            token: Some("s3cret-operator-token".into()),
            origins: vec!["https://ops.example.com".into()],
            ..Options::default()
        },
    );
    let got = secure
        .sign_in(
            "/signin",
            Some("https://ops.example.com"),
            "erin",
            "s3cret-operator-token",
        )
        .await;
    assert!(got.cookie.contains("; Secure"), "{}", got.cookie);

    // Without a token nobody signs in.
    let reader = Desk::new(&app, Options::default());
    assert_eq!(reader.get("/signin").await.status, StatusCode::FORBIDDEN);
}

// Behind a reverse proxy that passes its own `Host`, the browser's origin is the proxy's
// address: the operator lists it, and only it is let through.
#[tokio::test]
async fn a_proxys_origin_acts_only_when_the_operator_lists_it() {
    let app = shop("o-proxied").await;
    let (id, _) = letter_status(&app).await;
    let discard = format!("/letters/{id}/discard");
    let proxy = Some("https://ops.example.com");
    let desk = async |origins: &[&str]| {
        let mut desk = Desk::new(
            &app,
            Options {
                token: Some("s3cret-operator-token".into()),
                origins: origins.iter().map(|o| (*o).to_owned()).collect(),
                ..Options::default()
            },
        );
        desk.sign_in("/signin", SAME, "erin", "s3cret-operator-token")
            .await;
        let token = desk.form_token("/", &discard).await;
        (desk, format!("csrf={token}"))
    };
    let (unlisted, form) = desk(&[]).await;
    let got = unlisted.post(&discard, &form, proxy).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "not listed");
    let (other, form) = desk(&["https://ops.example.org"]).await;
    let got = other.post(&discard, &form, proxy).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "another origin listed");
    assert_eq!(letter_status(&app).await.1, "failed", "nothing ran");
    let (listed, form) = desk(&["https://ops.example.com/"]).await;
    let got = listed.post(&discard, &form, proxy).await;
    assert_eq!(got.status, StatusCode::SEE_OTHER);
    assert_eq!(got.location, "/?done=discarded");
    assert_eq!(letter_status(&app).await.1, "discarded");
}

// A web page elsewhere cannot point its own name at the page's address and read it (DNS
// rebinding): a request for a host the page does not answer to is refused. A fake notice cannot
// be planted through a link either.
#[tokio::test]
async fn another_host_is_refused_and_a_notice_is_only_a_known_one() {
    let app = shop("o-host").await;
    let page = router(app.app().clone(), Options::default());
    let request = Request::get("/")
        .header(header::HOST, "rebound.example:8080")
        .body(Body::empty())
        .unwrap();
    let response = page.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST);
    let (status, html, _) = get(&app, None, "/?done=Your+session+expired").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !html.contains("session expired"),
        "an unknown notice is not shown"
    );
    let (_, html, _) = get(&app, None, "/?done=discarded").await;
    assert!(html.contains("The letter was discarded."), "{html}");
}

// Nothing is left out in silence: an instance whose state does not read is named beside the
// timeline, with a link to its story, and the letters' heading counts every open letter, those
// beyond the list included.
#[tokio::test]
async fn the_overview_names_what_it_cannot_read_and_counts_every_open_letter() {
    let app = shop("o-odd").await;
    support::write_state(
        &app,
        "OrderPayment",
        "o-odd",
        serde_json::json!({ "reminders": "two" }),
    )
    .await;
    let (_, html, _) = get(&app, None, "/").await;
    assert!(
        html.contains("Left out, their state does not read"),
        "{html}"
    );
    assert!(
        html.contains(r#"<a href="/instances/OrderPayment/o-odd">"#),
        "{html}"
    );
    assert!(html.contains("reminders"), "the field is named: {html}");
    assert!(
        html.contains(r#"Open dead letters <span class="muted">1</span>"#),
        "{html}"
    );

    for n in 0..200 {
        app.dispatch(PlaceOrder {
            order_id: format!("o-many-{n}"),
            total: 1,
        })
        .await
        .unwrap();
    }
    app.run_until_idle().await.unwrap();
    let (_, html, _) = get(&app, None, "/").await;
    assert!(html.contains("201, the oldest 200 shown"), "{html}");
    assert_eq!(html.matches(r#"<tr class="letter">"#).count(), 200);
    let letters = support::letters(&app).await;
    let place = |id: &str| html.find(id).unwrap_or(usize::MAX);
    assert!(
        place(&letters[0].id) < place(&letters[1].id),
        "the oldest letter, o-odd's, comes first"
    );
}

// Embedded in a user's own server: nested at a path beside the user's own routes, every link,
// form, frame and redirect of the page starts with that path.
#[tokio::test]
async fn nested_in_a_larger_router_its_links_forms_and_redirects_keep_its_path() {
    let app = shop("o-nested").await;
    let page = router(
        app.app().clone(),
        Options {
            token: Some("s3cret-operator-token".into()),
            path: "/ops/".into(),
            ..Options::default()
        },
    );
    let server = axum::Router::new()
        .route("/", axum::routing::get(|| async { "the shop's own home" }))
        .nest("/ops", page);
    let get = |path: &str| request("GET", path).body(Body::empty()).unwrap();

    let Answered {
        status, body: html, ..
    } = answer(&server, get("/")).await;
    assert_eq!(
        (status, html.as_str()),
        (StatusCode::OK, "the shop's own home")
    );
    let Answered {
        status, body: html, ..
    } = answer(&server, get("/ops")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(r#"<a href="/ops">bounda</a>"#), "{html}");
    assert!(html.contains(r#"action="/ops/explain""#), "{html}");
    assert!(html.contains(r#"href="/ops/instances""#), "{html}");
    assert!(html.contains(r#"src="/ops/lag""#), "{html}");
    assert!(
        html.contains(r#"href="/ops/instances/OrderPayment/o-nested""#),
        "{html}"
    );
    assert!(html.contains(r#"href="/ops/signin""#), "{html}");
    for path in ["/ops/lag", "/ops/instances/OrderPayment/o-nested"] {
        let status = answer(&server, get(path)).await.status;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    let Answered {
        status, location, ..
    } = answer(
        &server,
        get("/ops/explain?process=OrderPayment&id=o-nested"),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location, "/ops/instances/OrderPayment/o-nested");
    let Answered {
        status, body: html, ..
    } = answer(&server, get("/ops/instances/OrderPayment/o-none")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        html.contains(r#"<a href="/ops">Back to the overview</a>"#),
        "{html}"
    );

    // Signing in at its path keeps the session's cookie to that path; its forms post there.
    let mut desk = Desk::on(server);
    let signed = desk
        .sign_in("/ops/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    assert_eq!(signed.location, "/ops?done=signed-in");
    assert!(signed.cookie.contains("Path=/ops;"), "{}", signed.cookie);
    let (id, _) = letter_status(&app).await;
    let html = desk.get("/ops").await.body;
    assert!(
        html.contains(&format!(r#"action="/ops/letters/{id}/retry""#))
            && html.contains(r#"action="/ops/signout""#),
        "{html}"
    );
    let got = desk
        .submit("/ops", &format!("/ops/letters/{id}/discard"), "")
        .await;
    assert_eq!(got.status, StatusCode::SEE_OTHER);
    assert_eq!(got.location, "/ops?done=discarded");
    assert_eq!(letter_status(&app).await.1, "discarded");
}

// What a payload carries is shown, never obeyed: an order id with markup and a slash reaches
// the instance page escaped, its links encode it whole, and ids that are dot segments stay
// links to themselves. A request that names no host is refused.
#[tokio::test]
async fn ids_from_payloads_are_escaped_encoded_and_reach_their_own_page() {
    let odd = format!("o/{SCRIPT}");
    let app = shop(&odd).await;
    for id in ["..", "."] {
        app.dispatch(PlaceOrder {
            order_id: id.into(),
            total: 1,
        })
        .await
        .unwrap();
    }
    app.run_until_idle().await.unwrap();
    let (status, html, _) = get(&app, None, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains(SCRIPT), "{html}");
    let link = "/instances/OrderPayment/o%2F%3Cscript%3Ealert%28%27owned%27%29%3C%2Fscript%3E";
    assert!(html.contains(&format!(r#"href="{link}""#)), "{html}");
    // The three reminders share the timeline's circle (the first's link); the search makes
    // the others' links, with the same encoding.
    let page = router(app.app().clone(), Options::default());
    for (id, encoded) in [("..", "%2E%2E"), (".", "%2E")] {
        let search = request("GET", &format!("/explain?process=OrderPayment&id={id}"))
            .body(Body::empty())
            .unwrap();
        let location = answer(&page, search).await.location;
        assert_eq!(location, format!("/instances/OrderPayment/{encoded}"));
    }

    let (status, html, _) = get(&app, None, link).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(!html.contains(SCRIPT), "{html}");
    assert!(
        html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"),
        "{html}"
    );
    for dots in ["%2E%2E", "%2E"] {
        let (status, html, _) = get(&app, None, &format!("/instances/OrderPayment/{dots}")).await;
        assert_eq!(status, StatusCode::OK, "{dots}: {html}");
        assert!(html.contains("started by OrderPlaced"), "{html}");
    }

    let nameless = Request::get("/").body(Body::empty()).unwrap();
    let Answered {
        status, body: html, ..
    } = answer(&page, nameless).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{html}");
}

mod fragile {
    use super::*;

    /// Follows an order a day after it is placed, and fails when it is paid: its instance is then
    /// failed with its follow-up pending.
    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderCancelled])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Fragile {
        #[deadline]
        pub follow_up: Deadline,
    }

    #[process]
    impl Fragile {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<FragilePatch> {
            Ok(FragilePatch::default().follow_up(cx.after(hours(24))))
        }

        async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<()> {
            anyhow::bail!("the ledger is down")
        }

        async fn at_follow_up(_cx: At<'_, Self>) -> Result<AtFollowUp> {
            Ok(AtFollowUp::new(Deadline::none()))
        }
    }
}

// Issue 19: a failed instance's deadline stays on the page, held by its letter: on the
// timeline, on its instance's page, and counted in the lag panel (its follow-up and its timeout).
#[tokio::test]
async fn a_failed_instances_deadline_is_drawn_held_by_its_letter() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<fragile::Fragile>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: "o-fragile".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-fragile".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letter = support::letters(&app).await[0].id.clone();
    let (_, html, _) = get(&app, None, "/").await;
    assert!(html.contains(r#"<circle class="held""#), "{html}");
    assert!(
        html.contains(&format!("(held by its failure: letter {letter})")),
        "{html}"
    );
    let (_, html, _) = get(&app, None, "/instances/Fragile/o-fragile").await;
    assert!(
        html.contains(&format!("(held by its failure: letter {letter})")),
        "{html}"
    );
    let (_, html, _) = get(&app, None, "/lag").await;
    assert!(
        html.contains("2 held by failed instances until their letters are retried"),
        "{html}"
    );
}

// Issue 20: an instance whose scheduler entry disagrees with its state (a migration gave it a
// deadline before its entry) is shown so on the timeline, its page and the lag panel.
#[tokio::test]
async fn an_entry_that_disagrees_with_its_state_is_shown_on_the_page() {
    let clinic = clinic::Clinic::new().await;
    let first = clinic.deploy(clinic::v1::build).await;
    first
        .dispatch(clinic::v1::Book {
            appointment_id: "a-9".into(),
            slot: clinic.in_hours(48),
        })
        .await
        .unwrap();
    first.advance(hours(25)).await.unwrap();
    let second = clinic.deploy(clinic::v2::build).await;
    let (_, html, _) = get(&second, None, "/").await;
    assert!(
        html.contains("(its scheduler entry disagrees with its state)"),
        "{html}"
    );
    let (_, html, _) = get(&second, None, "/instances/AppointmentFlow/a-9").await;
    assert!(
        html.contains("Scheduler: its scheduler entry is armed at"),
        "{html}"
    );
    let (_, html, _) = get(&second, None, "/lag").await;
    assert!(html.contains("1 scheduler entries that disagree"), "{html}");
}

// issue 24: the bulk page counts the open letters a filter matches (the confirmation), retries
// them all with the token in the background, and refuses without it.
#[tokio::test]
async fn letters_are_counted_then_retried_in_bulk_from_the_page() {
    let app = shop("bulk-1").await;
    app.dispatch(place("bulk-2")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let desk = Desk::signed_in(&app, "s3cret-operator-token", "erin").await;
    let page = "/letters/bulk?handler=mail_on_order_placed&error=mail+server";
    let (status, signed_out, _) = get(&app, Some("s3cret-operator-token"), page).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !signed_out.contains("Retry all") && signed_out.contains("Sign in</a> to act here."),
        "{signed_out}"
    );
    let Answered {
        status, body: html, ..
    } = desk.get(page).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("<strong>2</strong> open letters match"),
        "{html}"
    );
    assert!(
        html.contains("Retry all 2") && html.contains("Discard all 2"),
        "{html}"
    );
    let (_, scripted, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/letters/bulk?error=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    )
    .await;
    assert!(
        !scripted.contains("<script>") && scripted.contains("&#60;script&#62;"),
        "the filter is shown escaped: {scripted}"
    );
    // By when they last failed: both failed at the clock's start.
    let (_, later, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/letters/bulk?from=2026-01-02T00:00:00Z",
    )
    .await;
    assert!(
        later.contains("<strong>0</strong> open letters match"),
        "{later}"
    );
    let (_, earlier, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/letters/bulk?until=2026-01-02T00:00:00Z",
    )
    .await;
    assert!(
        earlier.contains("<strong>2</strong> open letters match"),
        "{earlier}"
    );
    let (status, unreadable, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/letters/bulk?from=yesterday",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        unreadable.contains("`yesterday` is not a moment"),
        "{unreadable}"
    );
    let (_, none, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/letters/bulk?error=disk+full",
    )
    .await;
    assert!(
        none.contains("<strong>0</strong> open letters match"),
        "{none}"
    );
    assert!(!none.contains("Retry all"), "nothing to act on: {none}");
    let (_, overview, _) = get(&app, Some("s3cret-operator-token"), "/").await;
    assert!(
        overview.contains("/letters/bulk"),
        "the overview links to it"
    );

    // Without a session, or with another form's token, nothing moves.
    let got = Desk::new(&app, Options::default())
        .post(
            "/letters/bulk/retry",
            "csrf=x&handler=mail_on_order_placed",
            SAME,
        )
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    let discard_token = desk.form_token(page, "/letters/bulk/discard").await;
    let got = desk
        .post(
            "/letters/bulk/retry",
            &format!("csrf={discard_token}"),
            SAME,
        )
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    let open = bounda::store::LetterFilter {
        status: Some(bounda::store::LetterStatus::Failed),
        ..Default::default()
    };
    assert_eq!(app.app().dead_letters().count(&open).await.unwrap(), 2);

    HEALED
        .lock()
        .unwrap()
        .extend(["bulk-1".to_owned(), "bulk-2".to_owned()]);
    // The form's filter is what runs: one that matches nothing retries nothing.
    let token = desk.form_token(page, "/letters/bulk/retry").await;
    let bulk = async |form: &str| {
        desk.post("/letters/bulk/retry", &format!("csrf={token}&{form}"), SAME)
            .await
    };
    // Time for a bulk action that matches nothing to run and end (on a server its reads are
    // round trips): what it retried would show by then.
    let settle = async || tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // A filter that matches nothing, a failure time after both letters, a count taken before
    // them: nothing is retried.
    for form in [
        "handler=mail_on_order_placed&error=disk+full",
        "from=2026-01-02T00:00:00Z",
        "counted_at=2025-12-31T00:00:00Z",
    ] {
        let got = bulk(form).await;
        assert_eq!(got.status, StatusCode::SEE_OTHER, "{form}");
        settle().await;
        let open_now = app.app().dead_letters().count(&open).await.unwrap();
        assert_eq!(open_now, 2, "{form} retries nothing");
    }
    let got = bulk("handler=mail_on_order_placed&error=mail+server&limit=2").await;
    assert_eq!(got.status, StatusCode::SEE_OTHER);
    assert_eq!(got.location, "/?done=bulk-retry-started");
    // The retry runs in the background: waited for, up to ten seconds (on a server each of its
    // reads is a round trip, so turns of the task alone may not be enough).
    support::beside_worker(&app, async {
        for _ in 0..1_000 {
            if app.app().dead_letters().count(&open).await.unwrap() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(app.app().dead_letters().count(&open).await.unwrap(), 0);
    let (_, overview, _) = get(
        &app,
        Some("s3cret-operator-token"),
        "/?done=bulk-retry-started",
    )
    .await;
    assert!(
        overview.contains("run in batches in the background"),
        "{overview}"
    );
}

// Issue 24: the overview counts each process's instances by status and what is overdue, each
// count a link to the list; the list filters and pages them.
#[tokio::test]
async fn the_page_counts_and_lists_instances_by_status_and_deadline() {
    let app = shop("o-list").await;
    for id in ["o-list-2", "o-list-3"] {
        app.dispatch(PlaceOrder {
            order_id: id.into(),
            total: 1,
        })
        .await
        .unwrap();
        app.advance(hours(1)).await.unwrap();
    }
    // Past the first reminders, without running them.
    app.clock().advance(hours(30));
    let (status, overview, _) = get(&app, None, "/").await;
    assert_eq!(status, StatusCode::OK);
    let processes = section(&overview, "processes");
    assert!(
        processes.contains("<code>OrderPayment</code>")
            && processes
                .contains(r#"href="/instances?process=OrderPayment&#38;status=running">3</a>"#)
            && processes.contains(
                r#"href="/instances?process=OrderPayment&#38;due=overdue&#38;order=soonest">3</a>"#
            )
            && processes.contains("due 8h ago"),
        "{processes}"
    );

    let (status, list, _) = get(
        &app,
        None,
        "/instances?process=OrderPayment&due=overdue&order=soonest&limit=2",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list.contains("<strong>3</strong> instances match"),
        "{list}"
    );
    let rows: Vec<&str> = list.split(r#"<tr class="instance">"#).skip(1).collect();
    assert_eq!(rows.len(), 2, "{list}");
    assert!(
        rows[0].contains("<code>o-list</code>") && rows[0].contains("overdue"),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains("<code>o-list-2</code>"), "{}", rows[1]);
    let next = list
        .split(r#"<a id="next-page" href=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .replace("&#38;", "&");
    let (_, rest, _) = get(&app, None, &next).await;
    let rows: Vec<&str> = rest.split(r#"<tr class="instance">"#).skip(1).collect();
    assert_eq!(rows.len(), 1, "{rest}");
    assert!(rows[0].contains("<code>o-list-3</code>"), "{}", rows[0]);
    assert!(
        !rest.contains("next-page"),
        "the last page leads nowhere: {rest}"
    );

    let (status, refused, _) = get(&app, None, "/instances?status=lost").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        refused.contains("running, failed, timed_out or completed"),
        "{refused}"
    );
    let (status, none, _) = get(&app, None, "/instances?id=nobody").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        none.contains("<strong>0</strong> instances match"),
        "{none}"
    );
}

/// The section `id` of `page`.
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!(r#"<section id="{id}">"#))
        .unwrap_or_else(|| panic!("no section {id}: {page}"));
    let rest = &page[start..];
    &rest[..rest.find("</section>").unwrap_or(rest.len())]
}

// Issue 24: the overview and the instance's page say what is paused, since when and by whom.
#[tokio::test]
async fn the_page_says_what_is_paused_and_by_whom() {
    let app = shop("o-paused").await;
    let process = bounda::store::PauseTarget::Process {
        name: "OrderPayment".into(),
    };
    app.app()
        .pause(process, "dana", Some("the gateway <is> down"))
        .await
        .unwrap();
    let (_, overview, _) = get(&app, None, "/").await;
    let paused = section(&overview, "paused");
    assert!(
        paused.contains("process OrderPayment paused since")
            && paused.contains("by dana: the gateway &#60;is&#62; down"),
        "escaped, with who and why: {paused}"
    );
    assert!(
        section(&overview, "processes").contains("paused by dana"),
        "{overview}"
    );
    let timeline = section(&overview, "timeline");
    assert!(
        timeline.contains(r#"<circle class="paused""#) && timeline.contains("(paused)"),
        "its deadlines are drawn paused: {timeline}"
    );
    let (_, story, _) = get(&app, None, "/instances/OrderPayment/o-paused").await;
    assert!(
        story.contains(r#"<p class="bad" id="paused">process OrderPayment paused since"#),
        "{story}"
    );
    // The lag panel says where the processes' checkpoint passed its events.
    let paid = support::pay(&app, "o-paused").await;
    app.run_until_idle().await.unwrap();
    let (_, lag, _) = get(&app, None, "/lag").await;
    assert!(
        lag.contains(&format!(
            r#"<div class="muted passed">passed the events of `OrderPayment` from position {paid} while held</div>"#
        )),
        "{lag}"
    );
}

// Issue 24: an instance's page leads to pausing it or its process, the overview to pausing a
// process or a policy and to resuming each pause, each through a confirmation that says what it
// holds or lets go, in the signed-in operator's name; without a session, or with another form's
// token, nothing is paused.
#[tokio::test]
async fn the_page_pauses_and_resumes_through_confirmations_in_the_operators_session() {
    let app = shop("o-pp").await;
    let story = "/instances/OrderPayment/o-pp";
    let reader = Desk::new(
        &app,
        Options {
            token: Some("secret-operator-token".into()),
            ..Options::default()
        },
    );
    assert!(!reader.get(story).await.body.contains(r#"id="pause-links""#));
    let desk = Desk::signed_in(&app, "secret-operator-token", "gail").await;
    let html = desk.get(story).await.body;
    let confirm = "/pauses/pause?kind=instance&name=OrderPayment&instance=o-pp";
    let linked = |html: &str, href: &str| {
        html.contains(&format!(r#"href="{}""#, href.replace('&', "&#38;")))
    };
    assert!(
        html.contains(r#"id="pause-links""#) && linked(&html, confirm),
        "{html}"
    );

    // The confirmation says what the pause holds, and pauses in the operator's name.
    let page = desk.get(confirm).await.body;
    assert!(
        page.contains("Pause instance OrderPayment o-pp?")
            && page.contains("Its events and its 3 pending deadlines wait")
            && page.contains("Pause as gail"),
        "{page}"
    );
    let process_page = desk
        .get("/pauses/pause?kind=process&name=OrderPayment")
        .await
        .body;
    assert!(
        process_page.contains("1 running instances: their events and deadlines wait.")
            && process_page.contains("0 of them have a deadline due already"),
        "{process_page}"
    );
    assert!(
        reader
            .get(confirm)
            .await
            .body
            .contains("Sign in</a> to act here."),
        "signed out, the confirmation does not act"
    );

    let fields = "kind=instance&name=OrderPayment&instance=o-pp&reason=checking";
    let got = reader
        .post("/pauses/pause", &format!("csrf=x&{fields}"), SAME)
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    let signout_token = desk.form_token(confirm, "/signout").await;
    let got = desk
        .post(
            "/pauses/pause",
            &format!("csrf={signout_token}&{fields}"),
            SAME,
        )
        .await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "another form's token");
    assert!(app.app().pauses().await.unwrap().is_empty());
    let got = desk.submit(confirm, "/pauses/pause", fields).await;
    assert_eq!(
        (got.status, got.location.as_str()),
        (StatusCode::SEE_OTHER, "/?done=paused")
    );
    let pauses = app.app().pauses().await.unwrap();
    assert_eq!(
        (
            pauses[0].target.to_string(),
            pauses[0].by.as_str(),
            pauses[0].reason.as_deref()
        ),
        (
            "instance OrderPayment o-pp".to_owned(),
            "gail",
            Some("checking")
        ),
        "the pause keeps the session's name"
    );
    let overview = desk.get("/?done=paused").await.body;
    assert!(
        overview.contains("Paused: every runner leaves it"),
        "{overview}"
    );
    let resume = "/pauses/resume?kind=instance&name=OrderPayment&instance=o-pp";
    assert!(linked(section(&overview, "paused"), resume), "{overview}");
    let page = desk.get(resume).await.body;
    assert!(
        page.contains("Resume instance OrderPayment o-pp?") && page.contains("run now, in order"),
        "{page}"
    );
    let got = desk
        .submit(
            resume,
            "/pauses/resume",
            "kind=instance&name=OrderPayment&instance=o-pp",
        )
        .await;
    assert_eq!(got.location, "/?done=resumed");
    assert!(app.app().pauses().await.unwrap().is_empty());

    // The overview leads to pausing a process, and a policy.
    let overview = desk.get("/").await.body;
    let policy = "/pauses/pause?kind=policy&name=mail_on_order_placed";
    assert!(
        linked(
            section(&overview, "processes"),
            "/pauses/pause?kind=process&name=OrderPayment"
        ) && linked(section(&overview, "policies"), policy),
        "{overview}"
    );
    let got = desk
        .submit(
            policy,
            "/pauses/pause",
            "kind=policy&name=mail_on_order_placed&reason=",
        )
        .await;
    assert_eq!(got.location, "/?done=paused");
    let pauses = app.app().pauses().await.unwrap();
    assert_eq!(
        (pauses[0].target.to_string(), pauses[0].reason.clone()),
        ("policy mail_on_order_placed".to_owned(), None)
    );
    let overview = desk.get("/").await.body;
    assert!(
        section(&overview, "policies").contains("paused since"),
        "{overview}"
    );

    let got = desk
        .submit(
            confirm,
            "/pauses/pause",
            "kind=instance&name=OrderPayment&instance=o-none",
        )
        .await;
    assert_eq!(
        got.status,
        StatusCode::BAD_REQUEST,
        "an instance that never started"
    );
    let unknown = desk.get("/pauses/pause?kind=planet&name=Mars").await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
}

// Issue 24: the overview charts how late the recent deadlines ran, by process: one that ran on
// time and one held six hours by a pause, each in its bucket, read from the log.
#[tokio::test]
async fn the_overview_charts_how_late_deadlines_ran() {
    let app = shop("o-late").await;
    let (_, before, _) = get(&app, None, "/").await;
    assert!(
        section(&before, "lateness").contains("No deadline ran among them."),
        "{before}"
    );
    // The first reminder runs when due; the second waits six hours behind a pause.
    app.advance(hours(24)).await.unwrap();
    let process = bounda::store::PauseTarget::Process {
        name: "OrderPayment".into(),
    };
    app.app()
        .pause(process.clone(), "erin", None)
        .await
        .unwrap();
    app.advance(hours(30)).await.unwrap();
    app.app().resume(&process).await.unwrap();
    app.run_until_idle().await.unwrap();
    let (_, overview, _) = get(&app, None, "/").await;
    let chart = section(&overview, "lateness");
    assert!(
        chart.contains("OrderPayment: 1 ran within 1 s late")
            && chart.contains("OrderPayment: 1 ran 1 h to 1 day late")
            && chart.contains("OrderPayment: 0 ran a day or more late"),
        "{chart}"
    );
    assert!(chart.contains("2 ran, the latest 6 h late"), "{chart}");
}

// Issue 43: wrong tokens share one budget for the whole page. Of 200 guesses sent at once only
// the free few are compared; the rest wait their turn (429, with when to try again). Twenty wrong
// tokens in a row lock sign-in, the right token included, until the lockout ends.
#[tokio::test]
async fn guesses_share_one_budget_and_a_run_of_them_locks_sign_in() {
    let app = shop("o-guess").await;
    let desk = Desk::new(&app, options("s3cret-operator-token"));
    let guesses = (0..200).map(|n| {
        let desk = &desk;
        async move {
            desk.post("/signin", &format!("name=eve&token=guess-{n}"), SAME)
                .await
                .status
        }
    });
    let answers = futures_util::future::join_all(guesses).await;
    let refused = answers
        .iter()
        .filter(|status| **status == StatusCode::FORBIDDEN)
        .count();
    let waiting = answers
        .iter()
        .filter(|status| **status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((refused, waiting), (4, 196), "{answers:?}");
    let mut desk = desk;
    let early = desk
        .sign_in("/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    assert_eq!(early.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(early.body.contains("try again in 1s"), "{}", early.body);

    // A run of wrong tokens, each after its wait, locks sign-in.
    let mut last = StatusCode::OK;
    for n in 0..16 {
        app.clock().advance(minutes(1));
        last = desk
            .post("/signin", &format!("name=eve&token=again-{n}"), SAME)
            .await
            .status;
    }
    assert_eq!(last, StatusCode::FORBIDDEN, "the twentieth wrong token");
    app.clock().advance(minutes(14));
    let locked = desk
        .sign_in("/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    assert_eq!(locked.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        locked.body.contains("Sign-in is locked until"),
        "{}",
        locked.body
    );
    app.clock().advance(minutes(1));
    let signed = desk
        .sign_in("/signin", SAME, "erin", "s3cret-operator-token")
        .await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
}

// Issue 43: a token that can be guessed is not taken: the page only reads.
#[tokio::test]
async fn a_short_token_leaves_the_page_reading_only() {
    let app = shop("o-short").await;
    assert!(
        bounda::page::check_token("ab")
            .unwrap_err()
            .to_string()
            .contains("needs at least 16 so that it cannot be guessed; make one with `openssl rand -hex 24`")
    );
    let mut desk = Desk::new(&app, options("ab"));
    let got = desk.sign_in("/signin", SAME, "erin", "ab").await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    assert!(got.body.contains("only reads"), "{}", got.body);
}

/// The page's options with `token`.
fn options(token: &str) -> Options {
    Options {
        token: Some(token.to_owned()),
        ..Options::default()
    }
}

// Issue 43: what the page refuses it says in a page of its own, with the way back: a retry that
// fails says why, a pause of a process the app does not have is not offered, a filter out of
// range is refused, and a form the web framework cannot read comes back as the page's answer,
// not plain text.
#[tokio::test]
async fn the_page_says_why_and_offers_nothing_it_does_not_have() {
    let app = shop("o-rough").await;
    let (id, _) = letter_status(&app).await;
    let desk = Desk::signed_in(&app, "s3cret-operator-token", "erin").await;
    let retry = format!("/letters/{id}/retry");
    let failed = support::beside_worker(&app, desk.submit("/", &retry, "")).await;
    assert_eq!(failed.status, StatusCode::OK, "{}", failed.body);
    assert!(
        failed.body.contains("The retry failed")
            && failed
                .body
                .contains("the mail server said &#60;script&#62;")
            && failed.body.contains("Back to the overview"),
        "{}",
        failed.body
    );
    assert_eq!(letter_status(&app).await.1, "failed");

    let nope = desk.get("/pauses/pause?kind=process&name=Nope").await;
    assert_eq!(nope.status, StatusCode::NOT_FOUND, "{}", nope.body);
    assert!(
        nope.body
            .contains("process `Nope` in this app (its processes: OrderPayment)")
            && !nope.body.contains(r#"action="/pauses/pause""#),
        "{}",
        nope.body
    );

    let huge = desk.get("/instances?limit=18446744073709551615").await;
    assert_eq!(huge.status, StatusCode::BAD_REQUEST);
    assert!(
        huge.body.contains("is no limit: 1 to 1000"),
        "{}",
        huge.body
    );

    let page = router(app.app().clone(), options("s3cret-operator-token"));
    let not_a_form = answer(
        &page,
        request("POST", "/signin")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ORIGIN, "http://127.0.0.1:8080")
            .body(Body::from("{}"))
            .unwrap(),
    )
    .await;
    assert_eq!(not_a_form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        not_a_form.body.contains("<h1>Unsupported Media Type</h1>")
            && not_a_form.body.contains("Back to the overview")
            && !not_a_form.policy.is_empty(),
        "{}",
        not_a_form.body
    );
}
