//! A complete minimal driver for the sans-IO core on blocking `std::net` sockets.
//!
//! It follows the contract written on `Client`: after every input or command, drain
//! `poll_output` until `Output::Timeout`, then wait for socket readiness, a new command or
//! the instant that `Timeout` gave.
//!
//! Run it against the loopback simulated broker (default) or a real one:
//!
//! ```sh
//! cargo run -p stellflow-sansio --example driver
//! cargo run -p stellflow-sansio --example driver -- 127.0.0.1:9092
//! ```
//!
//! This is the only place in the crate that touches sockets and the clock: the core itself never
//! does. Real adapters (tokio, smol, blocking) live in the runtime crates.

use bytes::BytesMut;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use stellflow_sansio::{Client, ClientConfig, ConnId, DisconnectReason, Event, Output, Target};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = match std::env::args().nth(1) {
        Some(_) => None,
        None => Some(stellflow_sim::serve("127.0.0.1:0")?),
    };
    let bootstrap = match (&server, std::env::args().nth(1)) {
        (_, Some(addr)) => addr,
        (Some(s), None) => s.local_addr().to_string(),
        (None, None) => unreachable!(),
    };

    let mut client = Client::new(ClientConfig::new(&bootstrap)?, Instant::now(), 0x5eed)?;
    let mut sockets: HashMap<ConnId, TcpStream> = HashMap::new();
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut inbuf = BytesMut::with_capacity(64 * 1024);
    let mut scratch = vec![0u8; 64 * 1024];

    let mut pending = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let now = Instant::now();
        // A command: once metadata is known, ask the cluster to describe itself.
        if pending.is_none() && !client.metadata().brokers.is_empty() {
            pending = Some(client.describe_cluster(now, Target::Any)?);
        }

        // The drain: every output of the client until it says when to wake.
        let wake_at = loop {
            out.clear();
            match client.poll_output(Instant::now(), &mut out) {
                Output::Connect(req) => match TcpStream::connect(req.address.to_string()) {
                    Ok(s) => {
                        s.set_nonblocking(true)?;
                        s.set_nodelay(true)?;
                        // A group client's connections ask for `req.unacked_timeout`: a driver
                        // sets TCP_USER_TIMEOUT to it (socket2's
                        // SockRef::set_tcp_user_timeout, Linux), as the adapters do; std
                        // cannot, so this one goes without that bound.
                        sockets.insert(req.conn, s);
                        client.handle_connected(req.conn, Instant::now());
                    }
                    Err(e) => client.handle_disconnected(
                        req.conn,
                        Instant::now(),
                        DisconnectReason::connect_failed(&e),
                    ),
                },
                Output::Close(close) => {
                    // std cannot set SO_LINGER; a driver that honours CloseMode::Abort sets it
                    // to zero first (socket2's SockRef::set_linger), as the adapters do.
                    sockets.remove(&close.conn);
                }
                Output::Transmit(conn) => send(&mut client, &mut sockets, conn, &out)?,
                // A large record blob comes shared, not copied into `out`: write it next.
                Output::TransmitBytes(conn, bytes) => {
                    send(&mut client, &mut sockets, conn, &bytes)?
                }
                Output::Event(Event::Admin { id, result })
                    if pending.is_some_and(|p| p.id() == id) =>
                {
                    let asked = pending.ok_or("no command pending")?;
                    match result.map(|outcome| outcome.take(asked)) {
                        Ok(Ok(c)) => println!(
                            "cluster {:?}: {} broker(s), {} topic(s) as seen by {}",
                            c.cluster_id, c.broker_count, c.topic_count, c.address
                        ),
                        other => println!("describe_cluster: {other:?}"),
                    }
                    client.close(Instant::now());
                    return Ok(());
                }
                Output::Event(other) => println!("event: {other:?}"),
                Output::Timeout(at) => break at,
            }
        };

        // Wait: poll each socket briefly (a real driver uses epoll/kqueue or an async runtime),
        // and fire timers when due.
        let mut got_input = false;
        let conns: Vec<ConnId> = sockets.keys().copied().collect();
        for conn in conns {
            let Some(s) = sockets.get_mut(&conn) else {
                continue;
            };
            match s.read(&mut scratch) {
                Ok(0) => {
                    sockets.remove(&conn);
                    client.handle_disconnected(conn, Instant::now(), DisconnectReason::PeerClosed);
                }
                Ok(n) => {
                    got_input = true;
                    inbuf.extend_from_slice(&scratch[..n]);
                    client.handle_input(conn, Instant::now(), &mut inbuf);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    sockets.remove(&conn);
                    client.handle_disconnected(conn, Instant::now(), DisconnectReason::io(&e));
                }
            }
        }
        if let Some(at) = wake_at
            && at <= Instant::now()
        {
            client.handle_timeout(Instant::now());
        }
        if !got_input {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Err("no answer within 10 s".into())
}

/// Writes `bytes` to `conn`'s socket; a failed write is reported as a disconnect.
fn send(
    client: &mut Client,
    sockets: &mut HashMap<ConnId, TcpStream>,
    conn: ConnId,
    bytes: &[u8],
) -> std::io::Result<()> {
    if let Some(s) = sockets.get_mut(&conn) {
        // A blocking write of the whole buffer keeps the example short.
        s.set_nonblocking(false)?;
        let r = s.write_all(bytes);
        s.set_nonblocking(true)?;
        if let Err(e) = r {
            sockets.remove(&conn);
            client.handle_disconnected(conn, Instant::now(), DisconnectReason::io(&e));
        }
    }
    Ok(())
}
