//! Impostors: a peer on a broker's address that is not a Stellflow broker
//! ([`FaultAction::Impostor`]). It answers the first request of every connection with garbage
//! (see [`Garbage`]), and the world checks, from outside the client, that the client reports it
//! as "not a Stellflow broker" for that address within [`NOT_STELLFLOW_BOUND`] of being handed
//! enough of the answer to tell (`not-stellflow-reported`), and that its reconnects to that
//! address wait the
//! reconnect cap (`not-stellflow-backoff`): from its first report to the impostor's leaving,
//! a client may connect to the address at most once per `reconnect_backoff_max` less the
//! jitter, plus one.

use super::*;
use bytes::BufMut;
use stellflow_sansio::ConnectionError;

/// How long after it was handed enough of the garbage answer to tell the client may take to
/// report the peer as not a Stellflow broker. The decision needs nothing but the bytes (no
/// timer), so the bound is one drain; a millisecond leaves room for the step that delivers it.
pub const NOT_STELLFLOW_BOUND: Duration = Duration::from_millis(1);

/// What an HTTP server answers a request it cannot read: as a frame length, `HTTP` is
/// 1,213,486,160 bytes.
const HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n";

/// The impostor's side of one connection.
#[derive(Debug)]
pub(super) struct ImpostorLink {
    garbage: Garbage,
    /// The request bytes received so far (until the first answer went out).
    rx: BytesMut,
    answered: bool,
}

/// What the checks remember of one connection to an impostor.
#[derive(Debug)]
pub(super) struct ImpostorConn {
    broker: i32,
    address: String,
    garbage: Garbage,
    /// Bytes of the garbage answer the client must still be handed before it can tell the
    /// answer is garbage ([`Garbage::telling_len`]).
    answer_pending: usize,
    /// When the client was handed enough of the garbage answer to tell (virtual time since the
    /// start). Counted at the hand-over, not predicted when the answer is sent: a link fault
    /// or a close after the send can keep the bytes from ever reaching the client, and then
    /// there is nothing the client could report.
    answer_arrives: Option<Duration>,
    /// Whether the report check concluded for this connection.
    checked: bool,
    /// When the connect was made (virtual time since the start).
    connected_at: Duration,
}

impl ImpostorLink {
    fn new(garbage: Garbage) -> Self {
        ImpostorLink {
            garbage,
            rx: BytesMut::new(),
            answered: false,
        }
    }

    /// Takes request bytes; returns the garbage answer once the first request's correlation id
    /// is in (an HTTP server answers as soon as it sees bytes that are not HTTP).
    fn on_request_bytes(&mut self, bytes: &[u8]) -> Option<BytesMut> {
        if self.answered {
            return None;
        }
        self.rx.extend_from_slice(bytes);
        let mut out = BytesMut::new();
        match self.garbage {
            Garbage::AbsurdLength => out.extend_from_slice(HTTP_ANSWER),
            Garbage::WrongCorrelation | Garbage::UndecodableBody => {
                // length (4), api key (2), api version (2), correlation id (4)
                let id = self.rx.get(8..12)?;
                let id = i32::from_be_bytes(<[u8; 4]>::try_from(id).ok()?);
                let (corr, body): (i32, &[u8]) = match self.garbage {
                    Garbage::WrongCorrelation => (id.wrapping_add(7_919), &[0, 0, 0, 0, 0, 0]),
                    _ => (id, &[0x7f]),
                };
                let mut frame = BytesMut::new();
                let header = stellflow_proto::ResponseHeader::new(corr, ErrorCode(0));
                stellflow_proto::frame::encode_response_header_only(&mut frame, &header);
                // Patch the length for the body appended after the header.
                let total = frame.len() - 4 + body.len();
                out.put_u32(u32::try_from(total).unwrap_or(u32::MAX));
                out.extend_from_slice(frame.get(4..).unwrap_or_default());
                out.extend_from_slice(body);
            }
        }
        self.answered = true;
        self.rx.clear();
        Some(out)
    }
}

/// The connection of a `ConnectionError::NotStellflow` event, if `e` is one.
pub(super) fn not_stellflow_conn(e: &Event) -> Option<u64> {
    match e {
        Event::ConnectionError {
            conn,
            error: ConnectionError::NotStellflow { .. },
            ..
        } => Some(conn.0),
        _ => None,
    }
}

impl World {
    /// The garbage an impostor on `broker`'s address answers, while one is there.
    pub(super) fn impostor_of(&self, broker: i32) -> Option<Garbage> {
        self.impostors.get(&broker).copied()
    }

    /// A client's connect to `broker`'s address reached the impostor there.
    pub(super) fn impostor_connected(
        &mut self,
        client: usize,
        conn: ConnId,
        broker: i32,
        address: &str,
        garbage: Garbage,
    ) -> ImpostorLink {
        let connected_at = self.elapsed();
        self.impostor_conns.insert(
            (client, conn.0),
            ImpostorConn {
                broker,
                address: address.to_owned(),
                garbage,
                answer_pending: 0,
                answer_arrives: None,
                checked: false,
                connected_at,
            },
        );
        ImpostorLink::new(garbage)
    }

    /// Request bytes reached the impostor end of `key`: its answer, if it has one now, goes
    /// into the network back to the client.
    pub(super) fn impostor_input(&mut self, key: (usize, u64), bytes: &[u8]) {
        let now = self.now;
        let Some(link) = self.links.get_mut(&key) else {
            return;
        };
        let Some(answer) = link
            .impostor
            .as_mut()
            .and_then(|i| i.on_request_bytes(bytes))
        else {
            return;
        };
        link.down.push(&mut self.rng, &self.net, now, &answer);
        if let Some(c) = self.impostor_conns.get_mut(&key) {
            c.answer_pending = c.garbage.telling_len(answer.len());
        }
    }

    /// `n` bytes from the impostor end of `key` were handed to its client: once enough of the
    /// garbage answer is in to tell it is garbage, the report bound starts.
    pub(super) fn impostor_delivered(&mut self, key: (usize, u64), n: usize) {
        let at = self.elapsed();
        if let Some(c) = self.impostor_conns.get_mut(&key)
            && c.answer_pending > 0
        {
            c.answer_pending = c.answer_pending.saturating_sub(n);
            if c.answer_pending == 0 && c.answer_arrives.is_none() {
                c.answer_arrives = Some(at);
            }
        }
    }

    /// Checks every impostor connection whose garbage answer arrived at least
    /// [`NOT_STELLFLOW_BOUND`] ago: its client must have reported the peer as not a Stellflow
    /// broker, for that address (`not-stellflow-reported`). Call after every step.
    pub fn check_impostors(&mut self) {
        let at = self.elapsed();
        let mut late = Vec::new();
        for (key, c) in self.impostor_conns.iter_mut() {
            let Some(arrives) = c.answer_arrives else {
                continue;
            };
            if c.checked || at < arrives + NOT_STELLFLOW_BOUND {
                continue;
            }
            let Some(slot) = self.clients.get(key.0) else {
                continue;
            };
            if slot.run != Run::Running {
                continue; // a paused client reads nothing; a crashed one reports nothing
            }
            c.checked = true;
            let taken = self.not_stellflow_taken.contains(key);
            let queued = slot.events.iter().any(|e| match e {
                Event::ConnectionError {
                    conn,
                    address,
                    error: error @ ConnectionError::NotStellflow { .. },
                } => {
                    conn.0 == key.1
                        && address.to_string() == c.address
                        && error.to_string().contains("not a Stellflow broker")
                }
                _ => false,
            });
            if !(taken || queued) {
                late.push(format!(
                    "client {} conn {} to {} (impostor for broker {}, {:?}): garbage answer arrived at {arrives:?}, no \"not a Stellflow broker\" report by {at:?}",
                    key.0, key.1, c.address, c.broker, c.garbage
                ));
            }
        }
        for detail in late {
            self.report("not-stellflow-reported", detail);
        }
    }

    /// The impostor on `broker`'s address leaves: its open connections are reset, and each
    /// client's connects to the address since its first report are held to the reconnect cap.
    pub(super) fn unmask(&mut self, broker: i32) {
        if self.impostors.remove(&broker).is_none() {
            return;
        }
        self.check_impostors();
        let open: Vec<(usize, u64)> = self
            .links
            .iter()
            .filter(|(_, l)| l.broker == broker && l.impostor.is_some())
            .map(|(k, _)| *k)
            .collect();
        for key in open {
            self.reset_link(key);
        }
        let at = self.elapsed();
        let mut problems = Vec::new();
        let conns: Vec<((usize, u64), ImpostorConn)> = std::mem::take(&mut self.impostor_conns)
            .into_iter()
            .collect();
        let (mine, others): (Vec<_>, Vec<_>) =
            conns.into_iter().partition(|(_, c)| c.broker == broker);
        self.impostor_conns = others.into_iter().collect();
        for client in mine.iter().map(|(k, _)| k.0).collect::<BTreeSet<usize>>() {
            let Some(slot) = self.clients.get(client) else {
                continue;
            };
            let min_gap = slot.reconnect_cap_min;
            let reported = |k: &(usize, u64)| {
                self.not_stellflow_taken.contains(k)
                    || slot
                        .events
                        .iter()
                        .any(|e| not_stellflow_conn(e) == Some(k.1))
            };
            let mut attempts: Vec<(Duration, bool)> = mine
                .iter()
                .filter(|(k, _)| k.0 == client)
                .map(|(k, c)| (c.connected_at, reported(k)))
                .collect();
            attempts.sort();
            let Some(first) = attempts.iter().position(|(_, r)| *r) else {
                continue;
            };
            let since = attempts[first].0;
            let after = attempts.len() - first - 1;
            let window = at.saturating_sub(since);
            let allowed = if min_gap.is_zero() {
                usize::MAX
            } else {
                (window.as_nanos() / min_gap.as_nanos()) as usize + 1
            };
            if after > allowed {
                problems.push(format!(
                    "client {client}: {after} connect(s) to broker {broker}'s address (an impostor) in the {window:?} after its first not-a-Stellflow-broker report at {since:?}; at most {allowed} at one per {min_gap:?} (the reconnect cap less jitter)"
                ));
            }
        }
        self.not_stellflow_taken
            .retain(|k| !mine.iter().any(|(m, _)| m == k));
        for p in problems {
            self.report("not-stellflow-backoff", p);
        }
    }
}
