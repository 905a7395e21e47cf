//! PgBouncer (Debian's package) in transaction pooling in front of the shared test server, as
//! production runs one: started from the installed binary on first use, stopped when the test
//! process ends.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const HOW: &str = "the pooled PostgreSQL tests need PgBouncer: install it (Debian: `apt-get install pgbouncer`), or set BOUNDA_PGBOUNCER to its binary";

/// The server connections the tests' PgBouncer keeps at most for the test server's database.
pub const POOLER_SERVER_CONNECTIONS: usize = 40;

/// The address of PgBouncer, in transaction pooling, in front of the shared test server (the
/// tests' `key=value` form, user `bounda`), or `None` with a server of one's own
/// (`BOUNDA_POSTGRES_URL`), which the tests do not put a pooler in front of. It does not say
/// `pool_mode=transaction`: a test adds it.
pub fn pooled_url() -> Result<Option<String>, String> {
    Ok(pooler_address()?.map(pooled_url_via))
}

/// PgBouncer's own address, as [`pooled_url`] starts it.
pub fn pooler_address() -> Result<Option<std::net::SocketAddr>, String> {
    static POOLER: OnceLock<Result<Option<std::net::SocketAddr>, String>> = OnceLock::new();
    POOLER
        .get_or_init(|| {
            if std::env::var("BOUNDA_POSTGRES_URL").is_ok() {
                return Ok(None);
            }
            start(super::address()?).map(Some)
        })
        .clone()
}

/// The pooler's address as [`pooled_url`] gives it, reached through `via` (a
/// [`Proxy`](super::Proxy) in front of [`pooler_address`]).
pub fn pooled_url_via(via: std::net::SocketAddr) -> String {
    format!(
        "host={} port={} user=bounda dbname=postgres",
        via.ip(),
        via.port()
    )
}

/// The installed binary: `BOUNDA_PGBOUNCER`, PATH, or Debian's place.
fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BOUNDA_PGBOUNCER") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("pgbouncer"))
                .find(|candidate| candidate.is_file())
        })
        .or_else(|| {
            let debian = Path::new("/usr/sbin/pgbouncer");
            debian.is_file().then(|| debian.to_owned())
        })
}

fn start(server: std::net::SocketAddr) -> Result<std::net::SocketAddr, String> {
    let binary = binary().ok_or_else(|| HOW.to_owned())?;
    let dir = tempfile::Builder::new()
        .prefix("bounda-pgbouncer-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("cannot make a directory for PgBouncer: {e}"))?
        .keep();
    let port = super::free_port()?;
    let ini = dir.join("pgbouncer.ini");
    let pidfile = dir.join("pgbouncer.pid");
    let users = dir.join("users.txt");
    let log = dir.join("pgbouncer.log");
    std::fs::write(&users, "\"bounda\" \"\"\n")
        .map_err(|e| format!("cannot write PgBouncer's users: {e}"))?;
    std::fs::write(
        &ini,
        format!(
            "[databases]\n\
             * = host={host} port={server_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {users}\n\
             pool_mode = transaction\n\
             max_client_conn = 1000\n\
             default_pool_size = {POOLER_SERVER_CONNECTIONS}\n\
             logfile = {log}\n\
             pidfile = {pidfile}\n\
",
            host = server.ip(),
            server_port = server.port(),
            users = users.display(),
            log = log.display(),
            pidfile = pidfile.display(),
        ),
    )
    .map_err(|e| format!("cannot write PgBouncer's settings: {e}"))?;
    // PgBouncer refuses to run as root: it runs as `nobody` then, owning its directory.
    let as_root = super::is_root();
    if as_root {
        for path in [&dir, &ini, &users] {
            super::chown_nobody(path)?;
        }
    }
    let mut command = match as_root {
        true => {
            let mut command = Command::new("runuser");
            command.args(["-u", "nobody", "--"]).arg(&binary);
            command
        }
        false => Command::new(&binary),
    };
    let status = command
        .arg("-d")
        .arg(&ini)
        .status()
        .map_err(|e| format!("cannot start PgBouncer ({}): {e}", binary.display()))?;
    if !status.success() {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        return Err(format!("PgBouncer did not start ({status}): {said}"));
    }
    watch(&pidfile, &dir)?;
    // Listening once it answers a connection.
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..100 {
        if std::net::TcpStream::connect(address).is_ok() {
            return Ok(address);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    Err(format!("PgBouncer did not listen on {address}: {said}"))
}

/// Stops PgBouncer and removes its directory when this process ends, however it ends.
fn watch(pidfile: &Path, dir: &Path) -> Result<(), String> {
    let stop = r#"kill "$(cat "$2")" >/dev/null 2>&1
rm -rf -- "$3""#;
    super::at_exit("PgBouncer", stop, &[pidfile.as_os_str(), dir.as_os_str()])
}
