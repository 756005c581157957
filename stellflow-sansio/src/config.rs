//! Client configuration and bootstrap-address parsing.
//!
//! Everything here is plain data: building a [`ClientConfig`] never touches the network. Defaults
//! follow the reference SDKs and the real server's limits (PROTOCOL.md §1.2).

use crate::address::{BrokerAddress, parse_bootstrap};
use crate::config_error::ConfigError;
use std::time::Duration;

/// Request-header fields sent with every request of this client (PROTOCOL.md §2.1).
///
/// Trace id, span id and trace flags are per request: see [`crate::RequestOptions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderFields {
    /// `clientId`. `None` (the default) means a unique id derived from the client's seed,
    /// `stellflow-rs-<16 hex digits>`: the server keys idempotent producers by it, so two
    /// client instances must not share one by accident.
    pub client_id: Option<String>,
    /// `tenantId` (ignored by today's server).
    pub tenant_id: Option<String>,
    /// `quotaKey` (the quota bucket when the server enables quotas).
    pub quota_key: Option<String>,
    /// `authContextId` (becomes the principal of the server's allow-all authenticator).
    pub auth_context_id: Option<String>,
    /// `trafficClass` (logging only on today's server).
    pub traffic_class: i8,
    /// `trafficTag` (logging only).
    pub traffic_tag: Option<String>,
    /// `flags` (no bits are defined; the server ignores them). Default 0.
    pub flags: i16,
}

/// Everything the core needs to know up front. Build with [`ClientConfig::new`] and adjust the
/// public fields.
///
/// ```
/// # use stellflow_sansio::ClientConfig;
/// use std::time::Duration;
/// let mut config = ClientConfig::new("stellflow://127.0.0.1:9092").unwrap();
/// config.request_timeout = Duration::from_secs(10);
/// config.header.client_id = Some("billing-service".into());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Where to start: every address is asked for metadata on start-up.
    pub bootstrap: Vec<BrokerAddress>,
    /// Header fields for every request.
    pub header: HeaderFields,
    /// Deadline of a request, counted from the command that created it (queueing, connecting
    /// and waiting for the answer included). Default 30 s.
    pub request_timeout: Duration,
    /// Requests sent and not yet answered per connection; more wait in the connection's queue.
    /// Default 64.
    pub max_in_flight_per_connection: usize,
    /// Largest response frame accepted, counting the 4-byte length prefix. A bigger frame closes
    /// the connection with an error event. Default 64 MiB, the reference SDKs' limit.
    pub max_response_frame: usize,
    /// First reconnect delay after a connection fails; doubles while connecting keeps failing
    /// (`reconnect.backoff.ms`). Default 100 ms.
    pub reconnect_backoff: Duration,
    /// Largest reconnect delay, jitter included (`reconnect.backoff.max.ms`): a broker that
    /// comes back is reconnected to within this. Default 1 s, Kafka's default.
    pub reconnect_backoff_max: Duration,
    /// Jitter applied to every backoff, as a fraction (0.2 = ±20 %); a backoff never exceeds
    /// its maximum because of it. Default 0.2.
    pub backoff_jitter: f64,
    /// Metadata is refreshed at least this often, even when nothing went wrong. Default 5 min.
    pub metadata_max_age: Duration,
    /// First delay between metadata refreshes triggered by errors (a leaderless partition, a
    /// leader error, a failed round); doubles while errors persist (`retry.backoff.ms`).
    /// Default 100 ms.
    pub metadata_refresh_backoff: Duration,
    /// Largest delay between error-triggered metadata refreshes, jitter included
    /// (`retry.backoff.max.ms`). A partition without a leader is re-checked at least this
    /// often, so a leader that comes back (a re-asserted leadership, a failover) is seen
    /// within this plus a round trip, and its consumers fetch and producers send at once.
    /// Default 1 s, Kafka's default.
    pub metadata_refresh_backoff_max: Duration,
    /// How long a new connection may take to answer its first request, ApiVersions (at most
    /// `request_timeout`); a peer silent that long is closed and retried with backoff
    /// (`socket.connection.setup.timeout.ms`). Default 3 s: the answer takes a round trip.
    pub connection_setup_timeout: Duration,
    /// How long no broker may answer before the cluster counts as unreachable
    /// ([`crate::HealthState::Unreachable`]): then the change is reported (the core's
    /// `Event::HealthChanged`; `cluster_health` shows it)
    /// and a consumer's next empty poll returns [`crate::ConsumerError::Unreachable`] (once
    /// per outage). Counted from the first failure after the last answer of any broker.
    /// Default 30 s (rdkafka raises its all-brokers-down error on a similar scale).
    pub unreachable_timeout: Duration,
    /// `clientSoftwareName` sent in ApiVersions.
    pub software_name: String,
    /// `clientSoftwareVersion` sent in ApiVersions.
    pub software_version: String,
    /// Producer settings (acks, batching, retries, idempotence, partitioners).
    pub producer: crate::producer_config::ProducerConfig,
    /// Consumer settings (group, reset policy, commits, fetch sizing).
    pub consumer: crate::consumer_config::ConsumerConfig,
    /// Producer and consumer hooks (interceptors), called by the client for every record
    /// sent, outcome, record consumed and commit. None by default.
    pub hooks: crate::hooks::Hooks,
}

impl ClientConfig {
    /// A configuration with defaults and the given bootstrap list: comma-separated `host:port`
    /// or `stellflow://host:port` entries (see [`BrokerAddress::parse`]).
    pub fn new(bootstrap: &str) -> Result<Self, ConfigError> {
        Ok(ClientConfig {
            bootstrap: parse_bootstrap(bootstrap)?,
            header: HeaderFields::default(),
            request_timeout: Duration::from_secs(30),
            max_in_flight_per_connection: 64,
            max_response_frame: 64 * 1024 * 1024,
            reconnect_backoff: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(1),
            backoff_jitter: 0.2,
            metadata_max_age: Duration::from_secs(300),
            metadata_refresh_backoff: Duration::from_millis(100),
            metadata_refresh_backoff_max: Duration::from_secs(1),
            unreachable_timeout: Duration::from_secs(30),
            connection_setup_timeout: Duration::from_secs(3),
            software_name: "stellflow-rs".to_owned(),
            software_version: env!("CARGO_PKG_VERSION").to_owned(),
            producer: crate::producer_config::ProducerConfig::default(),
            consumer: crate::consumer_config::ConsumerConfig::default(),
            hooks: crate::hooks::Hooks::default(),
        })
    }

    /// Checks values that would make the client misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.bootstrap.is_empty() {
            return Err(ConfigError::EmptyBootstrap);
        }
        if self.max_in_flight_per_connection == 0 {
            return Err(ConfigError::Invalid {
                field: "max_in_flight_per_connection",
                reason: "must be at least 1",
            });
        }
        if self.max_response_frame < 16 {
            return Err(ConfigError::Invalid {
                field: "max_response_frame",
                reason: "must hold at least a response header",
            });
        }
        if self.request_timeout.is_zero() {
            return Err(ConfigError::Invalid {
                field: "request_timeout",
                reason: "must be positive",
            });
        }
        if self.connection_setup_timeout.is_zero() {
            return Err(ConfigError::Invalid {
                field: "connection_setup_timeout",
                reason: "must be positive",
            });
        }
        if self.unreachable_timeout.is_zero() {
            return Err(ConfigError::Invalid {
                field: "unreachable_timeout",
                reason: "must be positive",
            });
        }
        self.producer.validate()?;
        self.consumer.validate()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let c = ClientConfig::new("a:1").unwrap();
        assert!(c.validate().is_ok());
        let mut bad = c.clone();
        bad.max_in_flight_per_connection = 0;
        assert!(bad.validate().is_err());
    }
}
