//! The driver honours the core's `ConnectRequest::unacked_timeout`: every connection of a
//! client with a group gets `TCP_USER_TIMEOUT` set to the lease margin (read back from the
//! socket with getsockopt), and a client without a group leaves the host's default. Linux
//! (Android, Fuchsia) only: elsewhere the option does not exist.
#![cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]

use std::future::Future;
use std::io;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_async::Runtime;
use stellflow_tokio::bytes::BytesMut;
use stellflow_tokio::{BrokerAddress, ClientConfig, Target, Tokio};
use tokio::net::TcpStream;

/// What the host holds on each connection the driver bounded, read back after the setter.
static BOUNDED: Mutex<Vec<Option<Duration>>> = Mutex::new(Vec::new());
/// Connections the driver opened.
static OPENED: Mutex<usize> = Mutex::new(0);

/// The tokio runtime, recording what the driver asks of it.
#[derive(Debug, Clone, Copy)]
struct Probe;

/// The tokio runtime's socket (with the `turmoil` feature, which the workspace build turns on
/// through `stellflow-turmoil`, a wrapper of the tokio stream).
type Socket = <Tokio as Runtime>::Socket;

/// The tokio stream of a socket.
fn tcp(socket: &Socket) -> &TcpStream {
    #[cfg(feature = "turmoil")]
    return socket
        .tcp_stream()
        .expect("a tokio stream outside a simulation");
    #[cfg(not(feature = "turmoil"))]
    socket
}

impl Runtime for Probe {
    type Socket = Socket;
    fn spawn(
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        Tokio::spawn(name, task)
    }
    async fn connect(address: BrokerAddress, limit: Duration) -> io::Result<Socket> {
        let s = Tokio::connect(address, limit).await;
        *OPENED.lock().unwrap() += 1;
        s
    }
    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send {
        Tokio::sleep_until(deadline)
    }
    fn try_read(socket: &Socket, buf: &mut [u8]) -> io::Result<usize> {
        Tokio::try_read(socket, buf)
    }
    fn try_read_buf(socket: &Socket, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        Tokio::try_read_buf(socket, buf, limit)
    }
    fn try_write(socket: &Socket, buf: &[u8]) -> io::Result<usize> {
        Tokio::try_write(socket, buf)
    }
    fn set_abort_on_close(socket: &Socket) -> io::Result<()> {
        Tokio::set_abort_on_close(socket)
    }
    fn set_unacked_timeout(socket: &Socket, timeout: Duration) -> io::Result<()> {
        let r = Tokio::set_unacked_timeout(socket, timeout);
        let held = socket2::SockRef::from(tcp(socket)).tcp_user_timeout()?;
        BOUNDED.lock().unwrap().push(held);
        r
    }
    fn poll_readable(socket: &Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Tokio::poll_readable(socket, cx)
    }
    fn poll_writable(socket: &Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Tokio::poll_writable(socket, cx)
    }
}

/// Connects an admin client for `config`, makes one call and closes it; the connections
/// opened meanwhile and what was bounded on them.
fn connections_of(config: ClientConfig) -> (usize, Vec<Option<Duration>>) {
    *OPENED.lock().unwrap() = 0;
    BOUNDED.lock().unwrap().clear();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let admin = stellflow_async::Admin::<Probe>::connect(config)
            .await
            .unwrap();
        admin.describe_cluster(Target::Any).await.unwrap();
        drop(admin);
    });
    let opened = *OPENED.lock().unwrap();
    (opened, BOUNDED.lock().unwrap().clone())
}

#[test]
fn a_group_clients_connections_carry_the_lease_margin_as_tcp_user_timeout() {
    // `STELLFLOW_BROKER=host:port` runs it against a real broker instead of the sim.
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let broker =
        std::env::var("STELLFLOW_BROKER").unwrap_or_else(|_| server.local_addr().to_string());
    let mut config = ClientConfig::new(&broker).unwrap();
    config.consumer.session_timeout = Duration::from_secs(3);
    config.consumer.heartbeat_interval = Duration::from_secs(1);

    let (opened, bounded) = connections_of(config.clone());
    assert!(opened >= 1);
    assert!(bounded.is_empty(), "no group, no bound: {bounded:?}");

    config.consumer.group_id = Some("g".into());
    let (opened, bounded) = connections_of(config);
    assert!(opened >= 1);
    assert_eq!(
        bounded,
        vec![Some(Duration::from_millis(750)); opened],
        "every connection holds min(heartbeat 1 s, session 3 s / 4)"
    );
}
