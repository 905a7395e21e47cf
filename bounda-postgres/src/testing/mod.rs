//! A throwaway PostgreSQL server for tests, started from the installed binaries in a
//! temporary directory on a local socket, and stopped when the test process ends. Each test
//! takes a schema of its own on it.
//!
//! `BOUNDA_POSTGRES_URL` points the tests at a server of your own instead; without it and
//! without PostgreSQL's server binaries, [`schema`] fails with how to get them, never passes.
//! [`Proxy`] stands for the network between a machine and the server.

mod pooler;
mod proxy;

pub use pooler::{POOLER_SERVER_CONNECTIONS, pooled_url, pooled_url_via, pooler_address};
pub use proxy::Proxy;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A server the tests of this process share.
#[derive(Debug)]
struct TestServer {
    url: String,
    /// Its TCP address, where a proxy can stand between it and a client.
    tcp: Option<std::net::SocketAddr>,
    /// Kept so the directory outlives the server; the watcher removes it.
    _dir: Option<tempfile::TempDir>,
    /// How to stop and start it again; none for a server of one's own.
    control: Option<Control>,
}

/// What stopping and starting the throwaway server again takes.
#[derive(Debug)]
struct Control {
    bin: PathBuf,
    dir: PathBuf,
    data: String,
    options: String,
    log: String,
    as_root: bool,
}

impl Control {
    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        run(&self.bin, &self.dir, self.as_root, "pg_ctl", args)
    }
}

/// Runs `program` of `bin` in `dir`, as `nobody` when `as_root`; its output when it fails.
fn run(bin: &Path, dir: &Path, as_root: bool, program: &str, args: &[&str]) -> Result<(), String> {
    let program = bin.join(program);
    let mut command = if as_root {
        let mut command = Command::new("runuser");
        command.args(["-u", "nobody", "--"]).arg(&program);
        command
    } else {
        Command::new(&program)
    };
    let output = command
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Takes the tables `options` name on the server at `url` back to schema `version`, as a build
/// of that version left them: drops the tables the later migrations created (what they held is
/// lost) and sets the version, so that connecting runs them again. For tests and benchmarks of
/// a migration; refuses when a later migration did more than create tables.
pub async fn downgrade(
    url: &str,
    options: &crate::Options,
    version: i32,
) -> Result<(), bounda::store::StoreError> {
    let names = crate::names::Names::new(&options.schema, &options.table_prefix)?;
    let statements = crate::schema::downgrade(&names, version)?;
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(crate::sql::failed("cannot connect to take the tables back"))?;
    let connection = tokio::spawn(connection);
    let done = client
        .batch_execute(&statements)
        .await
        .map_err(crate::sql::failed(
            "cannot take the tables back to an older schema",
        ));
    drop(client);
    let _ = connection.await;
    done
}

/// Stops the shared test server (its sessions end, new connections are refused), as a
/// restart, a failover or an outage does, until [`start_server`]. It stops it for every test
/// of this process: a test that calls it belongs in a test file of its own. An error for a
/// server of one's own (`BOUNDA_POSTGRES_URL`).
pub fn stop_server() -> Result<(), String> {
    control()?.pg_ctl(&["-D", &control()?.data, "-m", "fast", "-w", "stop"])
}

/// Starts the shared test server again after [`stop_server`], on the same socket and port.
pub fn start_server() -> Result<(), String> {
    let control = control()?;
    control.pg_ctl(&[
        "-D",
        &control.data,
        "-o",
        &control.options,
        "-l",
        &control.log,
        "-w",
        "start",
    ])
}

fn control() -> Result<&'static Control, String> {
    server()?.control.as_ref().ok_or_else(|| {
        "a server of one's own (BOUNDA_POSTGRES_URL) is not stopped by the tests".to_owned()
    })
}

/// The server of this test process, started on first use: it does not flush to disk (tests
/// need no durability, and run faster without).
fn server() -> Result<&'static TestServer, String> {
    static SERVER: OnceLock<Result<TestServer, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| start(Durability::Off, None))
        .as_ref()
        .map_err(Clone::clone)
}

/// A server that flushes every commit to disk, as a production one does: for measurements.
fn durable_server() -> Result<&'static TestServer, String> {
    static SERVER: OnceLock<Result<TestServer, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| start(Durability::On, None))
        .as_ref()
        .map_err(Clone::clone)
}

/// Whether the server flushes commits to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    On,
    Off,
}

/// A fresh schema on the shared server, for one test: its address and the schema's name,
/// unique to this run (process, time and a counter), so a server of one's own can be reused.
pub fn schema(test: &str) -> Result<(String, String), String> {
    fresh_schema(server()?, test)
}

/// A fresh schema, as [`schema`] gives, on a server that flushes every commit to disk (its own
/// throwaway server, or `BOUNDA_POSTGRES_URL`): what a benchmark measures on.
pub fn durable_schema(test: &str) -> Result<(String, String), String> {
    fresh_schema(durable_server()?, test)
}

fn fresh_schema(server: &TestServer, test: &str) -> Result<(String, String), String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() % 1_000_000_000);
    let schema = format!(
        "t{}_{started}_{n}_{}",
        std::process::id(),
        test.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(12)
            .collect::<String>()
            .to_ascii_lowercase()
    );
    Ok((server.url.clone(), schema))
}

/// A store on a fresh schema of the shared server, with `options` otherwise; without
/// PostgreSQL, a panic saying how to get it.
pub async fn store(test: &str, options: crate::Options) -> crate::PostgresStore {
    let (url, schema) = schema(test).unwrap_or_else(|how| panic!("{how}"));
    crate::PostgresStore::connect(&url, crate::Options { schema, ..options })
        .await
        .unwrap_or_else(|error| panic!("cannot connect to the test server: {error}"))
}

const HOW: &str = "the PostgreSQL tests need PostgreSQL: install its server (Debian: `apt-get install postgresql`; its binaries are found on PATH or in /usr/lib/postgresql/<version>/bin), or set BOUNDA_POSTGRES_URL to a server they may create schemas on";

/// A throwaway server of its own that offers TLS with a certificate for `localhost` only,
/// signed by an authority made for it: its TCP port, and the authority's certificate (a PEM
/// file) for `sslrootcert`. Connecting by `127.0.0.1` meets a certificate made for another
/// name. `None` with a server of one's own (`BOUNDA_POSTGRES_URL`), which the tests cannot give
/// TLS.
pub fn tls_server() -> Result<Option<(u16, std::path::PathBuf)>, String> {
    static SERVER: OnceLock<Result<Option<(TestServer, std::path::PathBuf)>, String>> =
        OnceLock::new();
    let started = SERVER.get_or_init(|| {
        if std::env::var("BOUNDA_POSTGRES_URL").is_ok() {
            return Ok(None);
        }
        let authority = tempfile::Builder::new()
            .prefix("bounda-pg-tls-")
            .tempdir_in("/tmp")
            .map_err(|e| format!("cannot make a directory for the certificates: {e}"))?;
        let certificates = certificates()?;
        let ca = authority.keep().join("ca.pem");
        std::fs::write(&ca, &certificates.authority)
            .map_err(|e| format!("cannot write the authority's certificate: {e}"))?;
        let server = start(Durability::Off, Some(certificates))?;
        Ok(Some((server, ca)))
    });
    match started {
        Ok(Some((server, ca))) => Ok(Some((tcp(server)?.port(), ca.clone()))),
        Ok(None) => Ok(None),
        Err(error) => Err(error.clone()),
    }
}

/// An authority, and a server certificate and key it signed for `localhost`, as PEM.
struct Certificates {
    authority: String,
    certificate: String,
    key: String,
}

fn certificates() -> Result<Certificates, String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let failed = |e: rcgen::Error| format!("cannot make the test certificates: {e}");
    let authority_key = KeyPair::generate().map_err(failed)?;
    let mut authority = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    authority
        .distinguished_name
        .push(DnType::CommonName, "bounda test authority");
    let authority = authority.self_signed(&authority_key).map_err(failed)?;
    let key = KeyPair::generate().map_err(failed)?;
    let certificate = CertificateParams::new(vec!["localhost".to_owned()])
        .map_err(failed)?
        .signed_by(&key, &authority, &authority_key)
        .map_err(failed)?;
    Ok(Certificates {
        authority: authority.pem(),
        certificate: certificate.pem(),
        key: key.serialize_pem(),
    })
}

/// Writes the server's certificate and key into `dir`, readable by the server alone, and the
/// settings that turn TLS on with them.
fn offer_tls(dir: &Path, certificates: &Certificates, as_root: bool) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let (certificate, key) = (dir.join("server.crt"), dir.join("server.key"));
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
        if as_root {
            chown_nobody(path)?;
        }
        Ok::<(), String>(())
    };
    write(&certificate, &certificates.certificate)?;
    write(&key, &certificates.key)?;
    Ok(format!(
        " -c ssl=on -c ssl_cert_file='{}' -c ssl_key_file='{}'",
        certificate.display(),
        key.display()
    ))
}

fn start(durability: Durability, tls: Option<Certificates>) -> Result<TestServer, String> {
    if let Ok(url) = std::env::var("BOUNDA_POSTGRES_URL") {
        let tcp = tcp_of(&url);
        return Ok(TestServer {
            url,
            tcp,
            _dir: None,
            control: None,
        });
    }
    let bin = binaries().ok_or_else(|| HOW.to_owned())?;
    // Under /tmp: a socket's path must stay short (about 100 bytes), whatever TMPDIR is.
    let dir = tempfile::Builder::new()
        .prefix("bounda-pg-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("cannot make a directory for the test server: {e}"))?;
    let data = dir.path().join("data");
    // The server refuses to run as root: it runs as `nobody` then, owning its directory.
    let as_root = is_root();
    if as_root {
        chown_nobody(dir.path())?;
    }
    let run = |program: &str, args: &[&str]| run(&bin, dir.path(), as_root, program, args);
    let data_arg = data.to_string_lossy().into_owned();
    // The watcher first: whatever happens from here, the server is stopped and its directory
    // removed when this process ends.
    watch(&bin, &data, dir.path(), as_root)?;
    run(
        "initdb",
        &[
            "-D",
            &data_arg,
            "-U",
            "bounda",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
    )?;
    let socket = dir.path().to_string_lossy().into_owned();
    let port = free_port()?;
    let flush = match durability {
        Durability::On => "",
        Durability::Off => " -c fsync=off -c synchronous_commit=off",
    };
    let tls = match tls {
        Some(certificates) => offer_tls(dir.path(), &certificates, as_root)?,
        None => String::new(),
    };
    let options = format!(
        "-k '{socket}' -p {port} -c listen_addresses='127.0.0.1' -c max_connections=200{flush}{tls}"
    );
    let log = dir.path().join("server.log");
    let log_arg = log.to_string_lossy().into_owned();
    run(
        "pg_ctl",
        &[
            "-D", &data_arg, "-o", &options, "-l", &log_arg, "-w", "start",
        ],
    )
    .map_err(|error| {
        let server_log = std::fs::read_to_string(&log).unwrap_or_default();
        format!("{error}\nthe server's log:\n{server_log}")
    })?;
    Ok(TestServer {
        url: format!("host={socket} port={port} user=bounda dbname=postgres"),
        tcp: Some(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        control: Some(Control {
            bin,
            dir: dir.path().to_owned(),
            data: data_arg,
            options,
            log: log_arg,
            as_root,
        }),
        _dir: Some(dir),
    })
}

/// A port nothing listens on now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port for the test server: {e}"))
}

/// The TCP address of a server's `url`, if it names one host by IP and port.
fn tcp_of(url: &str) -> Option<std::net::SocketAddr> {
    let config: tokio_postgres::Config = url.parse().ok()?;
    let host = match config.get_hosts().first()? {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        tokio_postgres::config::Host::Unix(_) => return None,
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .ok()?
        .next()
}

/// The shared server's TCP address, for a [`Proxy`]; an error if it has none (a server of
/// one's own on a socket).
pub fn address() -> Result<std::net::SocketAddr, String> {
    tcp(server()?)
}

/// The durable server's TCP address (see [`durable_schema`]), for a [`Proxy`].
pub fn durable_address() -> Result<std::net::SocketAddr, String> {
    tcp(durable_server()?)
}

fn tcp(server: &TestServer) -> Result<std::net::SocketAddr, String> {
    server.tcp.ok_or_else(|| {
        "the test server has no TCP address: set BOUNDA_POSTGRES_URL to one with host and port"
            .to_owned()
    })
}

/// The shared server's address as a `postgres://` URL through `via` (a [`Proxy`]), with the
/// server's user, password and database.
pub fn url_via(via: std::net::SocketAddr) -> Result<String, String> {
    url_through(server()?, via)
}

/// The durable server's address as a `postgres://` URL through `via`, as [`url_via`] gives.
pub fn durable_url_via(via: std::net::SocketAddr) -> Result<String, String> {
    url_through(durable_server()?, via)
}

fn url_through(server: &TestServer, via: std::net::SocketAddr) -> Result<String, String> {
    let config: tokio_postgres::Config = server
        .url
        .parse()
        .map_err(|e| format!("the test server's address does not read: {e}"))?;
    let user = config.get_user().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|password| format!(":{}", String::from_utf8_lossy(password)))
        .unwrap_or_default();
    let dbname = config.get_dbname().unwrap_or("postgres");
    Ok(format!("postgresql://{user}{password}@{via}/{dbname}"))
}

/// Stops the server and removes its directory once this process has ended.
fn watch(bin: &Path, data: &Path, dir: &Path, as_root: bool) -> Result<(), String> {
    let stop = r#"if [ "$5" = root ]; then runuser -u nobody -- "$2" -D "$3" stop -m immediate
else "$2" -D "$3" stop -m immediate; fi >/dev/null 2>&1
rm -rf -- "$4""#;
    let pg_ctl = bin.join("pg_ctl");
    let user = std::ffi::OsStr::new(if as_root { "root" } else { "user" });
    at_exit(
        "the test server",
        stop,
        &[pg_ctl.as_os_str(), data.as_os_str(), dir.as_os_str(), user],
    )
}

/// Runs the shell lines `stop` once this process has ended, however it ends: a shell in a
/// process group of its own (so a Ctrl-C to the tests does not take it first) waits for it,
/// since a test process has no hook at its end. `$1` is this process; `args` are `$2` on, so
/// paths go to the shell as arguments, never as code.
fn at_exit(what: &str, stop: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let script = format!("while kill -0 \"$1\" 2>/dev/null; do sleep 0.5; done\n{stop}");
    Command::new("sh")
        .args(["-c", &script, "watcher"])
        .arg(std::process::id().to_string())
        .args(args)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the watcher that stops {what}: {e}"))
}

/// Where `initdb` and `pg_ctl` are: `BOUNDA_POSTGRES_BIN`, PATH, or Debian's directory of the
/// newest installed version.
fn binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BOUNDA_POSTGRES_BIN") {
        return Some(PathBuf::from(dir));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn chown_nobody(dir: &Path) -> Result<(), String> {
    let status = Command::new("chown")
        .args(["nobody"])
        .arg(dir)
        .status()
        .map_err(|e| format!("cannot run chown: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("chown nobody {} failed", dir.display()))
    }
}
