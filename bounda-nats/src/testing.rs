//! A throwaway `nats-server` with JetStream for tests, started from the installed binary (Debian's
//! `nats-server` package) with its store in a temporary directory; stopped and started again on
//! the same port and store, as an outage does; killed when dropped.
//!
//! The server picks its own port on its first start and writes it to a ports file, so no port is
//! chosen by the test and freed again for another process to take in between. It counts as
//! started once it greets a connection with its `INFO` line: a bare TCP connect can succeed
//! without any server (a socket connected to itself), and a server that fails at start is named
//! with what it logged.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start may take before it fails.
const STARTING: Duration = Duration::from_secs(10);

/// A running `nats-server -js`.
#[derive(Debug)]
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts a server on a port of its choosing, waiting until it greets a connection. Fails
    /// naming what is missing when no `nats-server` is installed (`apt-get install nats-server`),
    /// and with the server's log when it does not start.
    pub fn start() -> anyhow::Result<NatsServer> {
        let mut server = NatsServer {
            child: None,
            port: 0,
            dir: tempfile::tempdir()?,
        };
        server.launch()?;
        Ok(server)
    }

    /// Its address: `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops it, as an outage does.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store, waiting until it greets a connection.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.launch()
    }

    /// Spawns the server (on its last port, or on one it picks when it has none yet) and waits
    /// until it greets a connection.
    fn launch(&mut self) -> anyhow::Result<()> {
        let binary = binary()?;
        let ports = self.dir.path().join("ports");
        std::fs::create_dir_all(&ports)?;
        let log = self.dir.path().join("nats-server.log");
        let port = if self.port == 0 {
            "-1".to_owned()
        } else {
            self.port.to_string()
        };
        let child = Command::new(&binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"])
            .arg(self.dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(&ports)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|error| anyhow::anyhow!("cannot start `{}`: {error}", binary.display()))?;
        let pid = child.id();
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                anyhow::bail!("nats-server exited at start ({status}): {}", tail(&log));
            }
            if self.port == 0 {
                self.port =
                    listening_port(&ports.join(format!("nats-server_{pid}.ports"))).unwrap_or(0);
            }
            if self.port != 0 && greets(self.port) {
                return Ok(());
            }
            if started.elapsed() > STARTING {
                self.stop();
                anyhow::bail!(
                    "nats-server did not greet a connection in {} s: {}",
                    STARTING.as_secs(),
                    tail(&log)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The client port a server wrote to its ports file (`{"nats":["nats://127.0.0.1:4222"]}`),
/// once it has.
fn listening_port(file: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(file).ok()?;
    let ports: serde_json::Value = serde_json::from_str(&text).ok()?;
    let url = ports.get("nats")?.get(0)?.as_str()?;
    url.rsplit(':').next()?.parse().ok()
}

/// Whether a server on `port` greets a new connection with its `INFO` line.
fn greets(port: u16) -> bool {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .is_err()
    {
        return false;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("INFO ")
}

/// The last lines the server logged, for an error that says why it did not start.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(8);
    match lines[from..].join("\n") {
        logged if logged.is_empty() => "it logged nothing".to_owned(),
        logged => format!("its log ends:\n{logged}"),
    }
}

/// The installed `nats-server`: `NATS_SERVER`, else on the path or in `/usr/sbin`.
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("NATS_SERVER") {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no nats-server is installed: `apt-get install nats-server`, or set NATS_SERVER"
            )
        })
}
