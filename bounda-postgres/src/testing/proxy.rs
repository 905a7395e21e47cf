//! A TCP proxy a test controls, standing for the network between one machine and the server:
//! [`Proxy::cut`] stops every byte both ways without closing anything, as a partition does, and
//! [`Proxy::heal`] lets what was held through, as TCP delivers it once the network is back.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy to one server address; dropped, it stops accepting and forwarding.
#[derive(Debug)]
pub struct Proxy {
    address: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Proxy {
    /// A proxy on a free local port forwarding to `server`.
    pub async fn start(server: SocketAddr) -> Result<Proxy, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot bind the proxy: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("the proxy has no address: {e}"))?;
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let accepting = {
            let cut = cut.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(server).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::spawn(forward(client_read, server_write, cut.subscribe()));
                    tokio::spawn(forward(server_read, client_write, cut.subscribe()));
                }
            })
        };
        Ok(Proxy {
            address,
            cut,
            accepting,
        })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops every byte, both ways, on every connection and any new one; nothing is closed.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Lets bytes through again, those held first.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

/// Copies `from` to `to` while not cut: a read waits for the network, and so does the write of
/// what was read.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        if cut.wait_for(|cut| !cut).await.is_err() {
            return;
        }
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(read) => read,
        };
        if cut.wait_for(|cut| !cut).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
