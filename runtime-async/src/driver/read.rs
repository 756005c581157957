//! Reading a connection: reads land back to back in one buffer and go to the core without
//! copying, up to the end of the frame the core is receiving (see [`Reader::read_all`]).

use crate::Runtime;
use crate::read_buffers::ReadBuffers;
use crate::state::{State, StateLock};
use bytes::BytesMut;
use std::io::{self, ErrorKind};
use std::time::Instant;
use stellflow_proto::frame::whole_frames;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{ConnId, DisconnectReason};

/// Size of a fresh read buffer (one allocation, shared by the record slices cut from it).
const READ_BUF: usize = 16 * 1024 * 1024;
/// Room a new frame starts with (a larger frame may need one copy).
const FRAME_ROOM: usize = 8 * 1024 * 1024 + 256 * 1024;
/// Most bytes read at a frame boundary (the next frame's length is not known yet).
const READ_MIN: usize = 64 * 1024;
/// Frames at least this long (and at most [`VEC_FRAME_MAX`], the protocol's default frame
/// limit: a longer one goes to the core, which refuses it) are read into a vector of their own
/// by a runtime with [`Runtime::READS_INTO_VEC`].
const VEC_FRAME_MIN: usize = 256 * 1024;
/// See [`VEC_FRAME_MIN`].
const VEC_FRAME_MAX: usize = 64 * 1024 * 1024;
/// Bytes read from one socket per wake-up before the core's outputs are drained.
const READ_BUDGET: usize = 8 * 1024 * 1024;

/// A connection's reading side: where reads land and what of the current frame is still to
/// come.
pub(crate) struct Reader {
    /// Room the next reads land in, back to back: its capacity. It may start with room a
    /// zeroing read left unfilled (see [`Runtime::try_read_buf`]).
    buf: BytesMut,
    /// Bytes of `buf`'s allocation.
    buf_size: usize,
    /// Earlier allocations of `buf`, reused once the client dropped what was read into them.
    buffers: ReadBuffers,
    /// A large frame being read into a vector of its own, and its total length (runtimes
    /// with [`Runtime::READS_INTO_VEC`] only).
    frame: Option<(Vec<u8>, usize)>,
    /// What the core still wants of the frame it is receiving (`DriverExt::input_wanted`), less
    /// what `held` has of it.
    want: usize,
    /// Bytes of the current frame read while a handle held the lock, not yet handed to the
    /// core: the front of `buf`'s allocation, right before `buf`.
    pub held: BytesMut,
}

impl Reader {
    /// A reader with nothing read yet.
    pub fn new() -> Self {
        Reader {
            buf: BytesMut::new(),
            buf_size: 0,
            buffers: ReadBuffers::new(),
            frame: None,
            want: 0,
            held: BytesMut::new(),
        }
    }

    /// Replaces `buf` with room for at least `len` bytes, keeping the old allocation for
    /// reuse.
    fn renew(&mut self, len: usize) {
        let old = std::mem::replace(&mut self.buf, self.buffers.take(len));
        self.buffers.keep(old, self.buf_size);
        self.buf_size = self.buf.capacity();
    }

    /// Reads what the socket has (outside the lock) and hands each read to the core without
    /// copying: reads land back to back in one buffer, so the core joins a frame split across
    /// reads in place. Reads stop at the end of the frame the core is receiving; a new frame
    /// starts only with [`FRAME_ROOM`] bytes of room, so a frame up to that size never
    /// straddles two buffers and is never copied. On a runtime with
    /// [`Runtime::READS_INTO_VEC`] (whose buffer reads zero their room first), a large frame
    /// that begins at a read's frame boundary is read on into a vector of its own instead,
    /// without zeroing, and handed over whole (its first bytes, at most [`READ_MIN`], copied).
    /// Inside a frame, a read that finds the client's lock taken (a handle is polling) keeps
    /// its bytes and reads on; they go to the core, joined, once the lock is free, the frame
    /// ends or the socket is empty, so a busy handle never stops the socket being drained.
    /// Returns why the connection ended, when it did.
    pub fn read_all<R: Runtime>(
        &mut self,
        socket: &R::Socket,
        lock: &StateLock,
        id: ConnId,
        now: Instant,
    ) -> Option<DisconnectReason> {
        let mut budget = READ_BUDGET;
        let gone = loop {
            // 1. One read, by the first of three ways that applies: bytes the runtime read
            //    for us already; else the large frame being read into its own vector; else
            //    a read into the connection's buffer.
            let step = self
                .take_ready::<R>(socket, lock, id, now)
                .or_else(|| self.read_frame_vec::<R>(socket, lock, id, now))
                .unwrap_or_else(|| self.read_into_buf::<R>(socket, lock, id, now));
            // 2. Read on until the socket is empty, it ends, or the pass's byte budget is
            //    spent (so one busy connection does not starve the others).
            match step {
                ReadStep::Read(n) => {
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        break None;
                    }
                }
                ReadStep::Stop(gone) => break gone,
            }
        };
        // 3. Bytes held while the lock was busy go to the core now; a socket that ended is
        //    the caller's to end.
        if !self.held.is_empty() {
            self.want = hand_in(&mut lock.lock(), id, now, &mut self.held);
        }
        gone
    }
}

/// What one read of [`Reader::read_all`] came to.
enum ReadStep {
    /// This many bytes were read (handed to the core, or held): read on.
    Read(usize),
    /// Stop reading: the socket is empty (`None`) or it ended (why).
    Stop(Option<DisconnectReason>),
}

impl ReadStep {
    /// The step for a failed read: an empty socket, or the end of the connection.
    fn failed(e: &io::Error) -> Self {
        match e.kind() {
            ErrorKind::WouldBlock => ReadStep::Stop(None),
            _ => ReadStep::Stop(Some(DisconnectReason::io(e))),
        }
    }
}

impl Reader {
    /// Bytes the runtime read for us already (a completion-based runtime), handed to the
    /// core; `None` when it holds none.
    fn take_ready<R: Runtime>(
        &mut self,
        socket: &R::Socket,
        lock: &StateLock,
        id: ConnId,
        now: Instant,
    ) -> Option<ReadStep> {
        Some(match R::take_read(socket)? {
            Ok(chunk) if chunk.is_empty() => ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
            Ok(mut chunk) => {
                let n = chunk.len();
                hand_in(&mut lock.lock(), id, now, &mut chunk);
                ReadStep::Read(n)
            }
            Err(e) => ReadStep::failed(&e),
        })
    }

    /// A read on into the large frame's own vector, handed to the core whole once complete;
    /// `None` when no such frame is being read.
    fn read_frame_vec<R: Runtime>(
        &mut self,
        socket: &R::Socket,
        lock: &StateLock,
        id: ConnId,
        now: Instant,
    ) -> Option<ReadStep> {
        let (vec, total) = self.frame.as_mut()?;
        Some(match R::try_read_vec(socket, vec, *total - vec.len()) {
            Ok(0) => ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
            Ok(n) => {
                if let Some((vec, _)) = self.frame.take_if(|(v, t)| v.len() == *t) {
                    let mut chunk = self.buffers.frame(vec);
                    self.want = hand_in(&mut lock.lock(), id, now, &mut chunk);
                }
                ReadStep::Read(n)
            }
            Err(e) => ReadStep::failed(&e),
        })
    }

    /// A read into the connection's buffer, up to the end of the frame the core is
    /// receiving (or [`READ_MIN`] at a frame boundary); a large frame that begins in it goes
    /// on into a vector of its own, and mid-frame bytes are held while the lock is busy.
    fn read_into_buf<R: Runtime>(
        &mut self,
        socket: &R::Socket,
        lock: &StateLock,
        id: ConnId,
        now: Instant,
    ) -> ReadStep {
        let at_boundary = self.want == 0;
        let limit = match self.want {
            0 if self.buf.capacity() < FRAME_ROOM => {
                // Not zeroed: the runtime reads into the spare room (or zeroes only what
                // one read may fill, right before it).
                self.renew(READ_BUF);
                READ_MIN
            }
            0 => READ_MIN,
            want if self.buf.capacity() < want => {
                self.renew(READ_BUF.max(want));
                want
            }
            want => want,
        };
        let room = limit.min(self.buf.capacity());
        let n = match R::try_read_buf(socket, &mut self.buf, room) {
            Ok(0) => return ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
            Ok(n) => n,
            Err(e) => return ReadStep::failed(&e),
        };
        // The bytes read are the front of `buf`; zeroed room may follow them.
        let mut chunk = self.buf.split_to(n);
        if R::READS_INTO_VEC && at_boundary {
            // A large frame that only begins here is read on into a vector of its own (no
            // zeroing); the whole frames before it go to the core.
            let (whole, partial) = whole_frames(&chunk);
            if let Some(total) = partial.filter(|t| (VEC_FRAME_MIN..=VEC_FRAME_MAX).contains(t)) {
                let head = chunk.split_off(whole);
                let mut vec = self.buffers.take_vec(total);
                vec.extend_from_slice(&head);
                self.frame = Some((vec, total));
            }
        }
        // Mid-frame, a busy lock (a handle decoding records) does not stop the reading: the
        // bytes are held, joined in place, until the lock is free.
        let mid_frame = self.frame.is_none() && n < self.want;
        let st = if mid_frame {
            lock.try_lock()
        } else {
            Some(lock.lock())
        };
        self.held.unsplit(chunk);
        let Some(mut st) = st else {
            self.want -= n;
            return ReadStep::Read(n);
        };
        self.want = hand_in(&mut st, id, now, &mut self.held);
        ReadStep::Read(n)
    }
}

/// Hands `bytes` (all of them) to the core; what it then wants of its current frame. At a
/// frame's end the callers waiting for records are woken at once, not after the rest of the
/// read pass (which may go on for [`READ_BUDGET`] bytes).
fn hand_in(st: &mut State, id: ConnId, now: Instant, bytes: &mut BytesMut) -> usize {
    let mut chunk = std::mem::take(bytes);
    st.client.handle_input(id, now, &mut chunk);
    let want = st.client.input_wanted(id);
    if want == 0 {
        st.wake_waiters();
    }
    want
}
