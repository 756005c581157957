//! A loopback TCP server around [`SimCluster`], with no async runtime: `std::net` and threads.
//!
//! One listener per broker (the first on the address given, the others on the same host with
//! an OS-chosen port), one engine thread that owns the cluster and its timers, and a reader and
//! a writer thread per connection. Each broker advertises its real bound address in Metadata and
//! FindCoordinator. [`SimServer::shutdown`] (or dropping the handle) stops every thread
//! promptly and closes every socket.
//!
//! ```
//! let server = stellflow_sim::serve("127.0.0.1:0").expect("bind");
//! let addr = server.local_addr();
//! assert!(addr.ip().is_loopback());
//! server.shutdown();
//! ```

use crate::cluster::{ConnId, SimCluster};
use crate::config::ClusterConfig;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Settings of a [`SimServer`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The brokers to serve (default: one broker, id 1, server defaults). Advertised addresses
    /// are replaced by the bound ones.
    pub cluster: ClusterConfig,
    /// Seed for every random choice of the simulated brokers.
    pub seed: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            cluster: ClusterConfig::default(),
            seed: 0x5eed,
        }
    }
}

type ControlFn = Box<dyn FnOnce(&mut SimCluster, Instant) + Send>;

enum Event {
    Accept(i32, TcpStream),
    Input(ConnId, Vec<u8>),
    Eof(ConnId),
    Control(ControlFn),
    Shutdown,
}

/// A running loopback server. Dropping it shuts it down.
pub struct SimServer {
    addrs: Vec<(i32, SocketAddr)>,
    stop: Arc<AtomicBool>,
    events: Sender<Event>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("addrs", &self.addrs)
            .finish()
    }
}

/// Starts a single simulated broker (id 1, server defaults) listening on `addr` (e.g.
/// `"127.0.0.1:0"`).
pub fn serve(addr: &str) -> io::Result<SimServer> {
    serve_with(addr, ServerConfig::default())
}

fn advertised_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// Starts the brokers of `config`, the first listening on `addr`, the others on the same host
/// with OS-chosen ports.
pub fn serve_with(addr: &str, config: ServerConfig) -> io::Result<SimServer> {
    if config.cluster.brokers.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no brokers configured",
        ));
    }
    let first = TcpListener::bind(addr)?;
    let first_addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..config.cluster.brokers.len() {
        listeners.push(TcpListener::bind(SocketAddr::new(first_addr.ip(), 0))?);
    }
    let mut cluster_cfg = config.cluster.clone();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    cluster_cfg.wall_clock_start_ms = wall;
    let mut addrs = Vec::new();
    for (b, l) in cluster_cfg.brokers.iter_mut().zip(&listeners) {
        let a = l.local_addr()?;
        b.host = advertised_ip(a.ip()).to_string();
        b.port = i32::from(a.port());
        addrs.push((b.broker_id, a));
    }
    let cluster = SimCluster::new(cluster_cfg, Instant::now(), config.seed);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut threads = Vec::new();
    for ((id, _), listener) in addrs.iter().zip(listeners) {
        let (id, stop, tx) = (*id, stop.clone(), tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("stellflow-sim-accept-{id}"))
                .spawn(move || accept_loop(id, listener, stop, tx))?,
        );
    }
    let engine_tx = tx.clone();
    threads.push(
        std::thread::Builder::new()
            .name("stellflow-sim-engine".into())
            .spawn(move || Engine::new(cluster, engine_tx).run(rx))?,
    );
    Ok(SimServer {
        addrs,
        stop,
        events: tx,
        threads,
    })
}

fn accept_loop(broker: i32, listener: TcpListener, stop: Arc<AtomicBool>, tx: Sender<Event>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let Ok(s) = stream {
            let _ = s.set_nodelay(true);
            if tx.send(Event::Accept(broker, s)).is_err() {
                break;
            }
        }
    }
}

struct ConnIo {
    stream: TcpStream,
    writer: Option<Sender<Bytes>>,
}

struct Engine {
    cluster: SimCluster,
    tx: Sender<Event>,
    conns: HashMap<ConnId, ConnIo>,
    threads: Vec<JoinHandle<()>>,
}

impl Engine {
    fn new(cluster: SimCluster, tx: Sender<Event>) -> Self {
        Engine {
            cluster,
            tx,
            conns: HashMap::new(),
            threads: Vec::new(),
        }
    }

    fn run(mut self, rx: Receiver<Event>) {
        loop {
            let event = match self.cluster.poll_timeout() {
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Ok(e) => Some(e),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(e) => Some(e),
                    Err(_) => break,
                },
            };
            let now = Instant::now();
            match event {
                None => self.cluster.handle_timeout(now),
                Some(Event::Shutdown) => break,
                Some(Event::Accept(broker, stream)) => self.accept(broker, stream, now),
                Some(Event::Input(conn, data)) => {
                    let mut buf = BytesMut::from(&data[..]);
                    self.cluster.handle_input(conn, now, &mut buf);
                }
                Some(Event::Eof(conn)) => {
                    self.cluster.disconnect(conn);
                    self.forget(conn);
                }
                Some(Event::Control(f)) => f(&mut self.cluster, now),
            }
            self.cluster.handle_timeout(Instant::now());
            self.drain();
        }
        for (_, c) in self.conns.drain() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn accept(&mut self, broker: i32, stream: TcpStream, now: Instant) {
        let Ok(conn) = self.cluster.connect(broker, now) else {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        };
        let (Ok(read_half), Ok(write_half)) = (stream.try_clone(), stream.try_clone()) else {
            self.cluster.disconnect(conn);
            return;
        };
        let (wtx, wrx) = mpsc::channel::<Bytes>();
        let tx = self.tx.clone();
        let reader = std::thread::Builder::new()
            .name("stellflow-sim-read".into())
            .spawn(move || read_loop(conn, read_half, tx));
        let writer = std::thread::Builder::new()
            .name("stellflow-sim-write".into())
            .spawn(move || write_loop(write_half, wrx));
        match (reader, writer) {
            (Ok(r), Ok(w)) => {
                self.threads.push(r);
                self.threads.push(w);
                self.conns.insert(
                    conn,
                    ConnIo {
                        stream,
                        writer: Some(wtx),
                    },
                );
            }
            _ => {
                let _ = stream.shutdown(Shutdown::Both);
                self.cluster.disconnect(conn);
            }
        }
        // Reap finished threads so a long-running server does not accumulate handles.
        let (done, running): (Vec<_>, Vec<_>) =
            self.threads.drain(..).partition(|t| t.is_finished());
        self.threads = running;
        for t in done {
            let _ = t.join();
        }
    }

    fn forget(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            drop(c.writer);
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }

    fn drain(&mut self) {
        while let Some((conn, bytes)) = self.cluster.poll_transmit() {
            if let Some(w) = self.conns.get(&conn).and_then(|c| c.writer.as_ref()) {
                let _ = w.send(bytes);
            }
        }
        while let Some(conn) = self.cluster.poll_closed() {
            self.cluster.disconnect(conn);
            self.forget(conn);
        }
    }
}

fn read_loop(conn: ConnId, mut stream: TcpStream, tx: Sender<Event>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Event::Eof(conn));
                return;
            }
            Ok(n) => {
                let data = buf.get(..n).unwrap_or_default().to_vec();
                if tx.send(Event::Input(conn, data)).is_err() {
                    return;
                }
            }
        }
    }
}

fn write_loop(mut stream: TcpStream, rx: Receiver<Bytes>) {
    while let Ok(bytes) = rx.recv() {
        if stream.write_all(&bytes).is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

impl SimServer {
    /// The address of the first broker (what a client bootstraps from).
    pub fn local_addr(&self) -> SocketAddr {
        self.addrs
            .first()
            .map(|(_, a)| *a)
            .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
    }

    /// Every broker's id and bound address.
    pub fn broker_addrs(&self) -> &[(i32, SocketAddr)] {
        &self.addrs
    }

    /// Runs `f` on the simulated cluster inside the engine thread (test knobs, crashes,
    /// leader moves…) and returns its result.
    pub fn with_cluster<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut SimCluster, Instant) -> R + Send + 'static,
    ) -> io::Result<R> {
        let (rtx, rrx) = mpsc::channel();
        let job = Box::new(move |c: &mut SimCluster, now: Instant| {
            let _ = rtx.send(f(c, now));
        });
        self.events
            .send(Event::Control(job))
            .map_err(|_| io::Error::new(io::ErrorKind::NotConnected, "server stopped"))?;
        rrx.recv_timeout(Duration::from_secs(30))
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "server did not answer"))
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.events.send(Event::Shutdown);
        for (_, a) in &self.addrs {
            let wake = SocketAddr::new(advertised_ip(a.ip()), a.port());
            let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(200));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}
