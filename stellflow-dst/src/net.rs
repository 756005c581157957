//! The simulated network: one ordered byte pipe per direction of every connection. A write is
//! split at random boundaries into segments, each delivered after latency plus jitter but never
//! before the segment ahead of it (TCP order); everything due at one instant is coalesced into
//! one read. A broker's close travels as a FIN behind the data already in the pipe. Each
//! segment keeps when it was written, for the sending host's user timeout (the world gives up
//! a connection whose oldest undelivered segment is older than it).

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use stellflow_sim::rng::SimRng;

/// Shape of the simulated network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetConfig {
    /// One-way latency of every segment.
    pub latency: Duration,
    /// Extra random delay per segment, `0..jitter` (order is kept regardless).
    pub jitter: Duration,
    /// Probability that a write (and then each remainder) is split at a random boundary.
    pub split_chance: f64,
}

impl Default for NetConfig {
    /// 200 µs latency, 1 ms jitter, writes split half of the time.
    fn default() -> Self {
        NetConfig {
            latency: Duration::from_micros(200),
            jitter: Duration::from_millis(1),
            split_chance: 0.5,
        }
    }
}

#[derive(Debug)]
enum Segment {
    Data(Bytes),
    Fin,
}

/// One direction of one connection.
#[derive(Debug)]
pub(crate) struct Pipe {
    /// (arrival, written, segment).
    queue: VecDeque<(Instant, Instant, Segment)>,
    last: Instant,
}

impl Pipe {
    pub(crate) fn new(now: Instant) -> Self {
        Pipe {
            queue: VecDeque::new(),
            last: now,
        }
    }

    fn arrival(&mut self, rng: &mut SimRng, cfg: &NetConfig, now: Instant) -> Instant {
        let jitter_us = u64::try_from(cfg.jitter.as_micros()).unwrap_or(u64::MAX);
        let at = now + cfg.latency + Duration::from_micros(rng.below(jitter_us));
        let at = at.max(self.last);
        self.last = at;
        at
    }

    /// Queues `bytes`, split at random boundaries.
    pub(crate) fn push(&mut self, rng: &mut SimRng, cfg: &NetConfig, now: Instant, bytes: &[u8]) {
        let mut rest = Bytes::copy_from_slice(bytes);
        while !rest.is_empty() {
            let cut = if rest.len() > 1 && rng.chance(cfg.split_chance) {
                1 + rng.below(rest.len() as u64 - 1) as usize
            } else {
                rest.len()
            };
            let seg = rest.split_to(cut);
            let at = self.arrival(rng, cfg, now);
            self.queue.push_back((at, now, Segment::Data(seg)));
        }
    }

    /// Queues an orderly close behind the data.
    pub(crate) fn push_fin(&mut self, rng: &mut SimRng, cfg: &NetConfig, now: Instant) {
        let at = self.arrival(rng, cfg, now);
        self.queue.push_back((at, now, Segment::Fin));
    }

    /// When the next segment arrives.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.queue.front().map(|(at, _, _)| *at)
    }

    /// When the oldest segment not delivered yet was written: the start of the sending host's
    /// user timeout (Linux counts `TCP_USER_TIMEOUT` from the first transmission of the oldest
    /// unacknowledged segment; here delivered is acknowledged).
    pub(crate) fn oldest_written(&self) -> Option<Instant> {
        self.queue.front().map(|(_, written, _)| *written)
    }

    /// Bytes not yet delivered.
    pub(crate) fn pending(&self) -> usize {
        self.queue
            .iter()
            .map(|(_, _, s)| match s {
                Segment::Data(b) => b.len(),
                Segment::Fin => 0,
            })
            .sum()
    }

    /// Everything due at `now`, coalesced; `true` when a FIN arrived (nothing follows it).
    pub(crate) fn take_due(&mut self, now: Instant, out: &mut BytesMut) -> bool {
        while let Some((at, _, _)) = self.queue.front() {
            if *at > now {
                break;
            }
            match self.queue.pop_front() {
                Some((_, _, Segment::Data(b))) => out.extend_from_slice(&b),
                Some((_, _, Segment::Fin)) => {
                    self.queue.clear();
                    return true;
                }
                None => break,
            }
        }
        false
    }

    /// Drops everything in flight.
    pub(crate) fn clear(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_bytes() {
        let now = Instant::now();
        let mut rng = SimRng::new(3);
        let cfg = NetConfig {
            split_chance: 0.9,
            ..NetConfig::default()
        };
        let mut p = Pipe::new(now);
        let data: Vec<u8> = (0..=255).collect();
        p.push(&mut rng, &cfg, now, &data);
        p.push_fin(&mut rng, &cfg, now);
        assert_eq!(p.pending(), 256);
        let mut out = BytesMut::new();
        let mut t = now;
        let mut fin = false;
        while let Some(at) = p.next_at() {
            assert!(at >= t);
            t = at;
            fin = p.take_due(t, &mut out);
        }
        assert!(fin);
        assert_eq!(&out[..], &data[..]);
    }
}
