//! Headless Chromium, driven over WebDriver: a page as an operator's browser shows it.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`CHROMIUM` and `CHROMEDRIVER` name other
//! binaries); without them the test fails and says how to install them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

/// A browser session and the driver that runs it; the driver is stopped when this is dropped.
pub struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts ChromeDriver on a free port and a headless Chromium through it, 1280 × 1000.
    pub async fn start() -> Browser {
        let chromium = installed(
            "CHROMIUM",
            &["chromium", "chromium-browser", "google-chrome"],
        );
        let chromedriver = installed("CHROMEDRIVER", &["chromedriver"]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap();
        let mut driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let profile = tempfile::tempdir().unwrap();
        // As the machine's probe runs it: no sandbox (root in a container), and none of the
        // background connections a closed network refuses.
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({ "binary": chromium, "args": args }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let started = Instant::now();
        let client = loop {
            let attempt = ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await;
            match attempt {
                Ok(client) => break client,
                Err(error) if started.elapsed() > Duration::from_secs(30) => {
                    let _ = driver.kill();
                    panic!("ChromeDriver did not start a browser in 30 s: {error}");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// The session, for finding, clicking and typing.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens `url` and waits for it to load.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// The text of the first element `css` finds, waiting for it to appear.
    pub async fn text(&self, css: &str) -> String {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no `{css}` on the page: {e}"))
            .text()
            .await
            .unwrap()
    }

    /// The text of the first element `css` finds, once it contains `expected`: after a click,
    /// the page it leads to may not have loaded yet. Ten seconds without it fail the test.
    pub async fn text_with(&self, css: &str, expected: &str) -> String {
        let started = Instant::now();
        loop {
            let seen = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if seen.contains(expected) {
                return seen;
            }
            if started.elapsed() > Duration::from_secs(10) {
                let url = self.client.current_url().await.map(|u| u.to_string());
                panic!("`{css}` at {url:?} does not say {expected:?}: {seen:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types `text` into the first element `css` finds.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.find(css).await.send_keys(text).await.unwrap();
    }

    /// Clicks the first element `css` finds.
    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// The first element `css` finds; none fails the test.
    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no `{css}` on the page: {e}"))
    }

    /// Saves what the window shows as `name`.png in `dir`, and returns its path.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Ends the session, which closes the browser, and stops the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

/// The binary `variable` names, or the first of `names` on the `PATH`.
fn installed(variable: &str, names: &[&str]) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the browser tests need {}: install Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver), or set {variable}",
                names[0]
            )
        })
}
