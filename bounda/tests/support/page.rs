//! The operator page through its router, as a browser uses it: answers, and an operator who
//! signs in and submits the forms the page gives them.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use bounda::page::{Options, router};
use tower::ServiceExt;

/// What the page answered.
pub struct Answered {
    pub status: StatusCode,
    /// `Location`, or empty.
    pub location: String,
    /// `Content-Security-Policy`, or empty.
    pub policy: String,
    /// `Set-Cookie`, or empty.
    pub cookie: String,
    pub body: String,
}

/// The answer of `page` to `request`.
pub async fn answer(page: &axum::Router, request: Request<Body>) -> Answered {
    let response = page.clone().oneshot(request).await.unwrap();
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &axum::http::HeaderValue| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (location, policy, cookie) = (
        header(header::LOCATION),
        header(header::CONTENT_SECURITY_POLICY),
        header(header::SET_COOKIE),
    );
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    Answered {
        status,
        location,
        policy,
        cookie,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// A request for `path` on the page's own host.
pub fn request(method: &str, path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "127.0.0.1:8080")
}

/// What the page answers `GET path` with, under `token`: status, body, and its content policy.
pub async fn get(
    app: &bounda::testing::TestApp,
    token: Option<&str>,
    path: &str,
) -> (StatusCode, String, String) {
    let page = router(
        app.app().clone(),
        Options {
            token: token.map(str::to_owned),
            ..Options::default()
        },
    );
    let got = answer(&page, request("GET", path).body(Body::empty()).unwrap()).await;
    (got.status, got.body, got.policy)
}

/// The page's own origin, as a browser sends it with the page's forms.
pub const SAME: Option<&str> = Some("http://127.0.0.1:8080");

/// An operator at the page: a router serving it, and their session cookie once signed in.
pub struct Desk {
    pub page: axum::Router,
    pub cookie: Option<String>,
}

impl Desk {
    /// The page of `app` served with `options`, nobody signed in.
    pub fn new(app: &bounda::testing::TestApp, options: Options) -> Desk {
        Desk::on(router(app.app().clone(), options))
    }

    /// `page`, nobody signed in.
    pub fn on(page: axum::Router) -> Desk {
        Desk { page, cookie: None }
    }

    /// The page of `app` served with `token`, and `name` signed in with it.
    pub async fn signed_in(app: &bounda::testing::TestApp, token: &str, name: &str) -> Desk {
        let options = Options {
            token: Some(token.to_owned()),
            ..Options::default()
        };
        let mut desk = Desk::new(app, options);
        let got = desk.sign_in("/signin", SAME, name, token).await;
        assert_eq!(got.status, StatusCode::SEE_OTHER, "{}", got.body);
        desk
    }

    /// Signs in at `path` as `name` with `token`, through a form sent from `origin`, keeping
    /// the cookie it is given.
    pub async fn sign_in(
        &mut self,
        path: &str,
        origin: Option<&str>,
        name: &str,
        token: &str,
    ) -> Answered {
        let got = self
            .post(path, &format!("name={name}&token={token}"), origin)
            .await;
        if let Some(value) = got.cookie.split(';').next().filter(|v| !v.is_empty()) {
            self.cookie = Some(value.to_owned());
        }
        got
    }

    /// `GET path`, with the session's cookie.
    pub async fn get(&self, path: &str) -> Answered {
        let mut get = request("GET", path);
        if let Some(cookie) = &self.cookie {
            get = get.header(header::COOKIE, cookie);
        }
        answer(&self.page, get.body(Body::empty()).unwrap()).await
    }

    /// A form posting `fields` to `action`, from `origin`, with the session's cookie.
    pub async fn post(&self, action: &str, fields: &str, origin: Option<&str>) -> Answered {
        let mut post = request("POST", action)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(origin) = origin {
            post = post.header(header::ORIGIN, origin);
        }
        if let Some(cookie) = &self.cookie {
            post = post.header(header::COOKIE, cookie);
        }
        answer(
            &self.page,
            post.body(Body::from(fields.to_owned())).unwrap(),
        )
        .await
    }

    /// The form token `page` gives its form posting to `action`, as a browser would send it.
    pub async fn form_token(&self, page: &str, action: &str) -> String {
        let html = self.get(page).await.body;
        form_token(&html, action)
            .unwrap_or_else(|| panic!("{page} has no form for {action}: {html}"))
    }

    /// Submits `page`'s form posting to `action` with `fields` and its form token, from the
    /// page's own origin.
    pub async fn submit(&self, page: &str, action: &str, fields: &str) -> Answered {
        let token = self.form_token(page, action).await;
        self.post(action, &format!("csrf={token}&{fields}"), SAME)
            .await
    }
}

/// The form token of `html`'s first form posting to `action`.
pub fn form_token(html: &str, action: &str) -> Option<String> {
    let form = html
        .split("<form")
        .find(|form| form.contains(&format!(r#"action="{action}""#)))?;
    let (_, rest) = form.split_once(r#"name="csrf" value=""#)?;
    Some(rest.split('"').next()?.to_owned())
}
