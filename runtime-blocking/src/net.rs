//! Blocking `std::net` sockets behind the driver's non-blocking interface: each connection
//! has a reader thread (it connects, then reads response frames, each into an allocation of its
//! own size, reusing the allocations of frames the client has dropped, and queues them for the
//! driver) and a writer thread (it writes what the driver hands over, in order). Bytes pass
//! between the threads and the driver without copying.

use crate::read_buffers::ReadBuffers;
use bytes::{Buf, Bytes, BytesMut};
use futures_channel::oneshot;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io::{self, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use stellflow_proto::frame::{LENGTH_PREFIX_LEN, frame_length};
use stellflow_sansio::BrokerAddress;

/// The reader's buffer for small reads (length prefixes and small frames, several a syscall);
/// a frame body larger than this is read straight into the frame's own allocation.
const SMALL_READS: usize = 64 * 1024;

/// The most the reader allocates for one piece of a frame: the protocol's default frame
/// limit. Longer frames are queued in pieces of this size.
const MAX_PIECE: usize = 64 * 1024 * 1024;

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
    /// The close is a reset: the writer thread writes nothing more it was handed.
    aborted: Arc<AtomicBool>,
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

    /// Makes the close a reset (`SO_LINGER` zero): the writer thread drops what it still
    /// holds, and the host discards what the broker has not received.
    pub fn set_abort_on_close(&self) -> io::Result<()> {
        self.aborted.store(true, Ordering::SeqCst);
        socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO))
    }

    /// Bounds how long the host keeps written bytes unacknowledged (`TCP_USER_TIMEOUT`,
    /// Linux, Android and Fuchsia; `Unsupported` elsewhere).
    pub fn set_unacked_timeout(&self, timeout: Duration) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
        return socket2::SockRef::from(&self.stream).set_tcp_user_timeout(Some(timeout));
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
        {
            let _ = timeout;
            Err(io::Error::new(
                ErrorKind::Unsupported,
                "TCP_USER_TIMEOUT is not available on this system",
            ))
        }
    }

    /// Hands all of `bytes` to the writer thread.
    pub fn hand_over(&self, bytes: Bytes) -> io::Result<()> {
        let gone = |_| io::Error::new(ErrorKind::BrokenPipe, "the connection's writer stopped");
        self.writer.send(bytes).map_err(gone)
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
    /// Closing the stream ends both threads. An aborted one only stops reading (a shutdown
    /// of the writing side would send a FIN behind the unsent bytes): its last handle, closed
    /// when the threads end, resets it.
    fn drop(&mut self) {
        let how = if self.aborted.load(Ordering::SeqCst) {
            Shutdown::Read
        } else {
            Shutdown::Both
        };
        let _ = self.stream.shutdown(how);
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

/// The most queued chunks the writer thread writes in one call.
const WRITE_CHUNKS: usize = 64;

/// Writes all of `chunks`, in order, with vectored writes; leaves it empty.
fn write_chunks(out: &mut impl Write, chunks: &mut VecDeque<Bytes>) -> io::Result<()> {
    chunks.retain(|c| !c.is_empty());
    while !chunks.is_empty() {
        let mut slices = [io::IoSlice::new(&[]); WRITE_CHUNKS];
        let k = chunks.len().min(WRITE_CHUNKS);
        for (slice, chunk) in slices.iter_mut().zip(chunks.iter()) {
            *slice = io::IoSlice::new(chunk);
        }
        let mut n = match out.write_vectored(slices.get(..k).unwrap_or_default()) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while let Some(front) = chunks.front_mut() {
            if n < front.len() {
                front.advance(n);
                break;
            }
            n -= front.len();
            chunks.pop_front();
        }
    }
    Ok(())
}

/// Resolves, connects within `limit`, and starts the writer thread.
fn open(
    address: &BrokerAddress,
    limit: Duration,
    inbox: Arc<Mutex<Inbox>>,
) -> io::Result<(Socket, TcpStream)> {
    let mut last = io::Error::new(ErrorKind::NotFound, "the name resolved to no address");
    let addrs = (address.host.as_str(), address.port)
        .to_socket_addrs()
        .map_err(|e| stellflow_async::unresolved(address, e))?;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                let (reader, mut out) = (stream.try_clone()?, stream.try_clone()?);
                let (writer, queue) = channel::<Bytes>();
                let aborted = Arc::new(AtomicBool::new(false));
                let stop = aborted.clone();
                std::thread::Builder::new()
                    .name(format!("stellflow-write-{address}"))
                    .spawn(move || {
                        let mut chunks = VecDeque::new();
                        while let Ok(bytes) = queue.recv() {
                            // What else is queued goes out in the same write (a frame's
                            // front and its shared record blob, several small frames).
                            chunks.push_back(bytes);
                            chunks.extend(queue.try_iter().take(WRITE_CHUNKS));
                            if stop.load(Ordering::SeqCst) {
                                return;
                            }
                            if write_chunks(&mut out, &mut chunks).is_err() {
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
                        aborted,
                    },
                    reader,
                ));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The reader thread: reads until EOF or an error, queueing each response frame for the
/// driver as one allocation of its own size.
///
/// Reading frame by frame (a small buffered read for the 4-byte length prefix, then the body
/// straight into a vector of its size) means the core gets every frame whole, so it never
/// copies one that would have spanned two read chunks, and `read_to_end` reads into the
/// vector's spare capacity, so no buffer is zeroed before a read. Bodies longer than
/// [`MAX_PIECE`] (beyond the protocol's default frame limit) are queued in pieces, leaving the
/// core to join or reject them, so a hostile length prefix cannot make this thread allocate
/// more than that at once.
fn read(stream: TcpStream, inbox: &Mutex<Inbox>) {
    let mut stream = BufReader::with_capacity(SMALL_READS, stream);
    // Large frames are read into allocations of earlier ones the client has dropped.
    let buffers = RefCell::new(ReadBuffers::new());
    let queue = |piece: Vec<u8>| {
        let chunk = buffers.borrow_mut().frame(piece);
        let mut st = lock(inbox);
        st.chunks.push_back(chunk);
        if let Some(w) = st.waker.take() {
            w.wake();
        }
    };
    let alloc = |len: usize| buffers.borrow_mut().take_vec(len);
    let end = loop {
        match read_frame(&mut stream, MAX_PIECE, alloc, queue) {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err((e.kind(), e.to_string())),
        }
    };
    let mut st = lock(inbox);
    st.end = Some(end);
    if let Some(w) = st.waker.take() {
        w.wake();
    }
}

/// Reads one frame from `stream`, handing it to `queue` whole (or in `max_piece` pieces, and
/// a truncated frame's bytes before EOF or an error). `Ok(false)` at EOF.
fn read_frame(
    stream: &mut impl Read,
    max_piece: usize,
    mut alloc: impl FnMut(usize) -> Vec<u8>,
    mut queue: impl FnMut(Vec<u8>),
) -> io::Result<bool> {
    let mut prefix = Vec::with_capacity(LENGTH_PREFIX_LEN);
    let got = read_up_to(stream, &mut prefix, LENGTH_PREFIX_LEN);
    if prefix.len() < LENGTH_PREFIX_LEN {
        if !prefix.is_empty() {
            queue(prefix);
        }
        return got.map(|()| false);
    }
    // The prefix is whole here: the bytes after it.
    let mut rest = frame_length(&prefix).map_or(0, |total| total - LENGTH_PREFIX_LEN);
    let mut piece = alloc(LENGTH_PREFIX_LEN + rest.min(max_piece));
    piece.extend_from_slice(&prefix);
    loop {
        let want = rest.min(max_piece.saturating_sub(piece.len()).max(1));
        let before = piece.len();
        let got = read_up_to(stream, &mut piece, want);
        rest -= piece.len() - before;
        if rest == 0 || piece.len() - before < want {
            if !piece.is_empty() {
                queue(piece);
            }
            return got.map(|()| rest == 0);
        }
        queue(piece);
        piece = alloc(rest.min(max_piece));
    }
}

/// Appends up to `n` bytes of `stream` to `out`, fewer only at EOF or on an error (the bytes
/// read before the error stay in `out`). Reads go into `out`'s spare capacity without zeroing.
fn read_up_to(stream: &mut impl Read, out: &mut Vec<u8>, n: usize) -> io::Result<()> {
    // `read_to_end` retries interrupted reads itself.
    stream.take(n as u64).read_to_end(out).map(drop)
}

#[cfg(test)]
mod tests {
    use super::read_frame;
    use std::io::{self, Read};

    /// A sink that takes at most `step` bytes a write (across the slices it is given), and
    /// counts its calls.
    struct Narrow {
        got: Vec<u8>,
        step: usize,
        calls: usize,
    }

    impl io::Write for Narrow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[io::IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            let mut left = self.step;
            for b in bufs {
                let k = left.min(b.len());
                self.got.extend_from_slice(&b[..k]);
                left -= k;
            }
            Ok(self.step - left)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn queued_chunks_are_written_whole_and_in_order_through_short_writes() {
        use bytes::Bytes;
        let chunks: Vec<Bytes> = (0..100u8)
            .map(|i| Bytes::from(vec![i; usize::from(i % 7)]))
            .collect();
        let want: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        for step in [1, 5, 64, 100_000] {
            let mut out = Narrow {
                got: Vec::new(),
                step,
                calls: 0,
            };
            let mut queue: std::collections::VecDeque<Bytes> = chunks.iter().cloned().collect();
            super::write_chunks(&mut out, &mut queue).unwrap();
            assert!(queue.is_empty());
            assert_eq!(out.got, want, "step {step}");
            if step == 100_000 {
                // Everything fits: one call per 64 chunks.
                assert_eq!(out.calls, 2);
            }
        }
        // A sink that takes nothing fails instead of spinning.
        let mut stuck = Narrow {
            got: Vec::new(),
            step: 0,
            calls: 0,
        };
        let mut queue: std::collections::VecDeque<Bytes> = chunks.into_iter().collect();
        let e = super::write_chunks(&mut stuck, &mut queue).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    }

    /// A stream that hands out at most `step` bytes a read, then fails or ends.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail_at_end: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len() - self.at);
            if n == 0 && self.fail_at_end {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    fn read_all(
        data: Vec<u8>,
        step: usize,
        max_piece: usize,
        fail: bool,
    ) -> (Vec<Vec<u8>>, io::Result<()>) {
        let mut s = Trickle {
            data,
            at: 0,
            step,
            fail_at_end: fail,
        };
        let mut pieces = Vec::new();
        loop {
            match read_frame(&mut s, max_piece, Vec::with_capacity, |p| pieces.push(p)) {
                Ok(true) => {}
                Ok(false) => return (pieces, Ok(())),
                Err(e) => return (pieces, Err(e)),
            }
        }
    }

    #[test]
    fn frames_arrive_whole_however_the_stream_splits_them() {
        let mut data = frame(b"hello");
        data.extend(frame(b""));
        data.extend(frame(&[7; 300]));
        for step in [1, 3, 4, 5, 1000] {
            let (pieces, end) = read_all(data.clone(), step, 1 << 20, false);
            assert!(end.is_ok());
            assert_eq!(
                pieces,
                vec![frame(b"hello"), frame(b""), frame(&[7; 300])],
                "step {step}"
            );
        }
    }

    #[test]
    fn long_frames_come_in_bounded_pieces_that_join_up() {
        let data = frame(&[9; 250]);
        let (pieces, end) = read_all(data.clone(), 64, 100, false);
        assert!(end.is_ok());
        assert!(
            pieces.iter().all(|p| p.len() <= 100),
            "{:?}",
            pieces.iter().map(Vec::len).collect::<Vec<_>>()
        );
        assert_eq!(pieces.concat(), data);
    }

    #[test]
    fn a_truncated_frame_is_queued_then_eof_or_the_error_ends_the_stream() {
        let mut data = frame(b"whole");
        data.extend(&frame(b"cut off")[..6]);
        let (pieces, end) = read_all(data.clone(), 2, 1 << 20, false);
        assert!(end.is_ok());
        assert_eq!(pieces.concat(), data);
        let (pieces, end) = read_all(data.clone(), 2, 1 << 20, true);
        assert_eq!(
            end.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionReset)
        );
        assert_eq!(pieces.concat(), data);
        let (pieces, end) = read_all(data[..2].to_vec(), 1, 1 << 20, false);
        assert!(end.is_ok());
        assert_eq!(pieces, vec![data[..2].to_vec()]);
    }

    /// The reader's round trip: a vector from the buffers, a queued frame, its rest kept; once
    /// the client drops the frame, the next large frame is read into the same allocation.
    #[test]
    fn a_dropped_frames_allocation_is_read_into_again() {
        use crate::read_buffers::ReadBuffers;
        let mut buffers = ReadBuffers::new();
        let mut frame = || {
            let mut v = buffers.take_vec(1 << 20);
            assert!(v.is_empty() && v.capacity() >= 1 << 20);
            v.resize(1 << 20, 1);
            let at = v.as_ptr();
            (buffers.frame(v).freeze(), at)
        };
        let (first, at) = frame();
        let (second, second_at) = frame();
        assert_ne!(at, second_at, "the first frame is still held");
        drop((first, second));
        assert_eq!(frame().1, at);
    }
}

#[cfg(all(
    test,
    any(target_os = "linux", target_os = "android", target_os = "fuchsia")
))]
mod user_timeout_tests {
    use super::*;

    /// The host really holds the bound the core asked for (read back with getsockopt).
    #[test]
    fn the_unacked_timeout_is_set_on_the_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let address = BrokerAddress::new("127.0.0.1", port);
        let socket = crate::block_on(connect(address, Duration::from_secs(5))).unwrap();
        let user_timeout = || socket2::SockRef::from(&socket.stream).tcp_user_timeout();
        assert_eq!(user_timeout().unwrap(), None, "the host's default first");
        socket
            .set_unacked_timeout(Duration::from_millis(750))
            .unwrap();
        assert_eq!(user_timeout().unwrap(), Some(Duration::from_millis(750)));
    }
}
