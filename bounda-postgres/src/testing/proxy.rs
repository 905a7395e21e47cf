//! A TCP proxy a test controls, standing for the network between one machine and the server:
//! [`Proxy::cut`] stops every byte both ways without closing anything, as a partition does, and
//! [`Proxy::heal`] lets what was held through, as TCP delivers it once the network is back.
//! [`Proxy::delayed`] puts the machine at a distance: every byte arrives a fixed time after it
//! was sent, each way, as over a network between machines, while what follows it is already on
//! its way (a pipelined statement waits one delay, not one per statement before it).
//!
//! It forwards on threads of its own, with blocking sockets: a delay of half a millisecond is
//! kept to the operating system's sleep (tens of microseconds), not rounded up to an async
//! runtime's timer tick, and a test or benchmark whose runtime is busy or blocked does not stall
//! the network.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A proxy to one server address; dropped, it stops accepting new connections.
#[derive(Debug)]
pub struct Proxy {
    address: SocketAddr,
    network: Arc<Network>,
}

/// Whether the network is cut, and whether the proxy was dropped, shared by every thread.
#[derive(Debug, Default)]
struct Network {
    cut: Mutex<bool>,
    changed: Condvar,
    closed: AtomicBool,
}

impl Network {
    /// Waits until the network is not cut.
    fn wait_for_link(&self) {
        let mut cut = self
            .cut
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while *cut {
            cut = self
                .changed
                .wait(cut)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn set_cut(&self, to: bool) {
        *self
            .cut
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = to;
        self.changed.notify_all();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.network.closed.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees it is closed.
        let _ = TcpStream::connect(self.address);
    }
}

impl Proxy {
    /// A proxy on a free local port forwarding to `server`.
    pub async fn start(server: SocketAddr) -> Result<Proxy, String> {
        Proxy::delayed(server, Duration::ZERO).await
    }

    /// A proxy on a free local port forwarding to `server`, each byte arriving `each_way` after
    /// it was sent, in both directions: a round trip costs twice `each_way`.
    pub async fn delayed(server: SocketAddr, each_way: Duration) -> Result<Proxy, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind the proxy: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("the proxy has no address: {e}"))?;
        let network = Arc::new(Network::default());
        let accepting = network.clone();
        std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept(listener, server, each_way, accepting))
            .map_err(|e| format!("cannot start the proxy: {e}"))?;
        Ok(Proxy { address, network })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops every byte, both ways, on every connection and any new one; nothing is closed.
    pub fn cut(&self) {
        self.network.set_cut(true);
    }

    /// Lets bytes through again, those held first.
    pub fn heal(&self) {
        self.network.set_cut(false);
    }
}

/// Accepts connections until the proxy is dropped, forwarding each to `server`.
fn accept(listener: TcpListener, server: SocketAddr, delay: Duration, network: Arc<Network>) {
    for client in listener.incoming() {
        if network.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(upstream) = TcpStream::connect(server) else {
            continue;
        };
        // Small writes go out at once, as they would on a real connection.
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (Ok(client_out), Ok(upstream_out)) = (client.try_clone(), upstream.try_clone()) else {
            continue;
        };
        for (from, to) in [(client, upstream_out), (upstream, client_out)] {
            let network = network.clone();
            let _ = std::thread::Builder::new()
                .name("proxy-forward".into())
                .spawn(move || forward(from, to, delay, network));
        }
    }
}

/// Copies `from` to `to` while not cut: a read waits for the network, and so does the write of
/// what was read; each piece is written `delay` after it was read, while later pieces are read.
fn forward(mut from: TcpStream, mut to: TcpStream, delay: Duration, network: Arc<Network>) {
    let (send, arriving) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writing = network.clone();
    let writer = std::thread::Builder::new()
        .name("proxy-deliver".into())
        .spawn(move || {
            for (at, bytes) in arriving {
                let wait = at.saturating_duration_since(Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                writing.wait_for_link();
                if to.write_all(&bytes).is_err() {
                    return;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        network.wait_for_link();
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if send
            .send((Instant::now() + delay, buffer[..read].to_vec()))
            .is_err()
        {
            break;
        }
    }
    // The writer delivers what is on its way, then closes.
    drop(send);
    if let Ok(writer) = writer {
        let _ = writer.join();
    }
}
