//! Blocking `std::net` sockets behind the driver's non-blocking interface: each connection
//! has a reader thread (it connects, then reads into one reused buffer and queues what it read
//! for the driver) and a writer thread (it writes what the driver hands over, in order). Bytes
//! pass between the threads and the driver without copying.

use bytes::{Buf, Bytes, BytesMut};
use futures_channel::oneshot;
use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use stellflow_sansio::BrokerAddress;

/// Read chunk size; one chunk holds many small responses or a slice of a big one.
const READ_CHUNK: usize = 256 * 1024;

/// What the reader thread queued and the driver has not taken yet.
#[derive(Default)]
struct Inbox {
    chunks: VecDeque<BytesMut>,
    /// The end of the stream: `None` while open, then EOF (`Ok`) or the error.
    end: Option<Result<(), (ErrorKind, String)>>,
    waker: Option<Waker>,
}

/// One connection, as the driver sees it.
pub struct Socket {
    stream: TcpStream,
    inbox: Arc<Mutex<Inbox>>,
    writer: Sender<Bytes>,
}

fn lock(inbox: &Mutex<Inbox>) -> MutexGuard<'_, Inbox> {
    inbox.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Socket {
    /// The next chunk the reader thread queued (empty at EOF; `WouldBlock` when none).
    pub fn take_read(&self) -> io::Result<BytesMut> {
        let mut inbox = lock(&self.inbox);
        if let Some(chunk) = inbox.chunks.pop_front() {
            return Ok(chunk);
        }
        match &inbox.end {
            None => Err(ErrorKind::WouldBlock.into()),
            Some(Ok(())) => Ok(BytesMut::new()),
            Some(Err((kind, msg))) => Err(io::Error::new(*kind, msg.clone())),
        }
    }

    /// Hands all of `bytes` to the writer thread.
    pub fn hand_over(&self, bytes: &mut BytesMut) -> io::Result<()> {
        let gone = |_| io::Error::new(ErrorKind::BrokenPipe, "the connection's writer stopped");
        self.writer.send(bytes.split().freeze()).map_err(gone)
    }

    /// Copies what the reader thread queued into `buf` (the driver uses [`Socket::take_read`]).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut inbox = lock(&self.inbox);
        let mut n = 0;
        while let Some(front) = inbox.chunks.front_mut().filter(|_| n < buf.len()) {
            let k = front.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&front[..k]);
            front.advance(k);
            n += k;
            if front.is_empty() {
                inbox.chunks.pop_front();
            }
        }
        match &inbox.end {
            _ if n > 0 => Ok(n),
            None => Err(ErrorKind::WouldBlock.into()),
            Some(Ok(())) => Ok(0),
            Some(Err((kind, msg))) => Err(io::Error::new(*kind, msg.clone())),
        }
    }

    /// Hands `buf` to the writer thread (it always takes all of it).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let gone = |_| io::Error::new(ErrorKind::BrokenPipe, "the connection's writer stopped");
        self.writer
            .send(Bytes::copy_from_slice(buf))
            .map_err(gone)?;
        Ok(buf.len())
    }

    /// Ready when the reader thread queued something or the stream ended.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inbox = lock(&self.inbox);
        if inbox.chunks.is_empty() && inbox.end.is_none() {
            inbox.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Socket {
    /// Closing the stream ends both threads.
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Connects on a thread of its own, which then becomes the connection's reader.
pub fn connect(
    address: BrokerAddress,
    limit: Duration,
) -> impl Future<Output = io::Result<Socket>> + Send + 'static {
    let (tx, rx) = oneshot::channel();
    let name = format!("stellflow-conn-{address}");
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        match open(&address, limit, inbox.clone()) {
            Ok((socket, reader)) => {
                if tx.send(Ok(socket)).is_ok() {
                    read(reader, &inbox);
                }
            }
            Err(e) => drop(tx.send(Err(e))),
        }
    });
    async move {
        spawned?;
        let gone = |_| io::Error::other("the connect thread ended");
        rx.await.unwrap_or_else(|e| Err(gone(e)))
    }
}

/// Resolves, connects within `limit`, and starts the writer thread.
fn open(
    address: &BrokerAddress,
    limit: Duration,
    inbox: Arc<Mutex<Inbox>>,
) -> io::Result<(Socket, TcpStream)> {
    let mut last = io::Error::new(ErrorKind::NotFound, "the name resolved to no address");
    for addr in (address.host.as_str(), address.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                let (reader, mut out) = (stream.try_clone()?, stream.try_clone()?);
                let (writer, queue) = channel::<Bytes>();
                std::thread::Builder::new()
                    .name(format!("stellflow-write-{address}"))
                    .spawn(move || {
                        while let Ok(bytes) = queue.recv() {
                            if out.write_all(&bytes).is_err() {
                                // The reader sees the failure and reports it.
                                let _ = out.shutdown(Shutdown::Both);
                                return;
                            }
                        }
                    })?;
                return Ok((
                    Socket {
                        stream,
                        inbox,
                        writer,
                    },
                    reader,
                ));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The reader thread: reads until EOF or an error, queueing each read for the driver.
fn read(mut stream: TcpStream, inbox: &Mutex<Inbox>) {
    // `buf`'s length is zeroed free space: reads go into it and each filled prefix is split
    // off. It is refilled once little is left, reusing the allocation when the core has
    // dropped every slice of the earlier chunks.
    let mut buf = BytesMut::new();
    loop {
        if buf.len() < READ_CHUNK / 16 {
            buf.clear();
            buf.reserve(READ_CHUNK);
            buf.resize(buf.capacity(), 0);
        }
        let r = stream.read(&mut buf);
        let mut st = lock(inbox);
        match r {
            Ok(0) => st.end = Some(Ok(())),
            Ok(n) => st.chunks.push_back(buf.split_to(n)),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => st.end = Some(Err((e.kind(), e.to_string()))),
        }
        let end = st.end.is_some();
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        if end {
            return;
        }
    }
}
