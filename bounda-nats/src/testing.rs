//! A throwaway `nats-server` with JetStream for tests, started from the installed binary (Debian's
//! `nats-server` package) on a free port with its store in a temporary directory; stopped and
//! started again on the same port and store, as an outage does; killed when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `nats-server -js`.
#[derive(Debug)]
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts a server, waiting until it takes connections. Fails naming what is missing when
    /// no `nats-server` is installed (`apt-get install nats-server`).
    pub fn start() -> anyhow::Result<NatsServer> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = NatsServer {
            child: None,
            port,
            dir: tempfile::tempdir()?,
        };
        server.resume()?;
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

    /// Starts it again on the same port and store, waiting until it takes connections.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.stop();
        let binary = binary()?;
        let child = Command::new(&binary)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| anyhow::anyhow!("cannot start `{}`: {error}", binary.display()))?;
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                anyhow::bail!("nats-server did not listen on port {} in 10 s", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
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
