//! [`Shared`]: the parts of the [`Client`](crate::Client) that are no feature's own — the
//! router, the metadata cache and its refresh schedule, the event queue, the random source,
//! the clock, and the observability, health, trace and hook state.
//!
//! The features (producer, consumer, admin) hold their own state and take this one borrow
//! view of the rest explicitly (`fn on_x(&mut self, sh: &mut Shared, ..)`), so a feature
//! never reaches into the client, and the client is the only module that sees every
//! feature. This module sits low: it imports no feature and not the client.

use crate::address::BrokerAddress;
use crate::event::Event;
use crate::hooks::Hooks;
use crate::metadata::{BrokerView, MetadataCache};
use crate::net::{Net, Origin};
use crate::observe::Observe;
use crate::refresh::Refresher;
use crate::request::{RequestOptions, Target, TraceContext};
use crate::rng::Rng;
use crate::trace::TraceIds;
use std::collections::VecDeque;
use std::time::Instant;
use stellflow_proto::messages::{MetadataRequest, MetadataResponse, RequestBody};

/// The client's state that every feature may use: held by the client as one field and lent
/// to a feature's methods as `&mut Shared` (or `&Shared`).
#[derive(Debug)]
pub(crate) struct Shared {
    /// The router: connections, requests in flight, counters.
    pub(crate) net: Net,
    /// The merged cluster metadata.
    pub(crate) metadata: MetadataCache,
    /// When the next metadata round is due, and the round in flight.
    pub(crate) refresher: Refresher,
    /// Events waiting for the driver's drain.
    pub(crate) events: VecDeque<Event>,
    /// The client's random source (seeded, so a run replays).
    pub(crate) rng: Rng,
    /// The time of the last input or command.
    pub(crate) last_now: Instant,
    /// The `clientId` sent in every request header.
    pub(crate) client_id: String,
    /// Whether the client was closed.
    pub(crate) closed: bool,
    /// Observability: the span every log line of this client is in, what the last metadata
    /// round looked like, and the last delivery failure logged (see [`crate::observe`]).
    pub(crate) obs: Observe,
    /// The cluster health last reported (see [`crate::health`]).
    pub(crate) health: crate::health::HealthReport,
    /// The trace context of the commands being made
    /// ([`DriverExt::with_trace`](crate::DriverExt::with_trace)).
    pub(crate) trace: Option<TraceIds>,
    /// The hooks of the configuration (called by the producer, the consumer and the client).
    pub(crate) hooks: Hooks,
}

impl Shared {
    /// `opts` with the command's trace context when it names none itself (`None`: use
    /// `opts` as they are).
    pub(crate) fn traced_options(&self, opts: &RequestOptions) -> Option<RequestOptions> {
        match (&opts.trace, &self.trace) {
            (None, Some(t)) => Some(RequestOptions {
                trace: Some(TraceContext::from(t)),
                ..opts.clone()
            }),
            _ => None,
        }
    }

    /// Asks `address` for metadata, as part of the refresh round in flight.
    pub(crate) fn ask_metadata(&mut self, now: Instant, address: BrokerAddress) {
        let seq = self.net.submit(
            now,
            Target::Address(address),
            RequestBody::Metadata(MetadataRequest::default()),
            None,
            Origin::Metadata,
            &RequestOptions::default(),
        );
        self.refresher.add(seq);
    }

    /// Applies one broker's Metadata answer: cache, broker addresses, and (during a round)
    /// questions to brokers discovered through it.
    pub(crate) fn apply_metadata(
        &mut self,
        now: Instant,
        address: BrokerAddress,
        resp: &MetadataResponse,
        seq: u64,
    ) {
        let view = BrokerView::from_response(&address, resp);
        let known: Vec<BrokerAddress> = self.net.addresses().map(|(a, _)| a.clone()).collect();
        self.metadata.apply(address, view);
        let brokers: Vec<(i32, BrokerAddress)> = self
            .metadata
            .cluster()
            .brokers
            .values()
            .map(|b| (b.id, b.address.clone()))
            .collect();
        for (id, a) in brokers {
            self.net.learn_broker(now, id, &a);
            if !known.contains(&a) && self.refresher.owns(seq) {
                self.ask_metadata(now, a);
            }
        }
    }
}
