//! Client configuration and bootstrap-address parsing.
//!
//! Everything here is plain data: building a [`ClientConfig`] never touches the network. Defaults
//! follow the reference SDKs and the real server's limits (PROTOCOL.md §1.2).

use crate::error::ConfigError;
use std::fmt;
use std::time::Duration;

/// A broker endpoint as the client dials it: `host:port`.
///
/// The `stellflow://host:port` form of the server's configuration is accepted on input and
/// normalised away (nothing textual is ever sent on the socket).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerAddress {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl BrokerAddress {
    /// An address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        BrokerAddress {
            host: host.into(),
            port,
        }
    }

    /// Parses one `host:port`, `stellflow://host:port` or `[v6]:port` address.
    ///
    /// ```
    /// # use stellflow_sansio::BrokerAddress;
    /// let a = BrokerAddress::parse("stellflow://broker-1:9092").unwrap();
    /// assert_eq!(a, BrokerAddress::new("broker-1", 9092));
    /// assert_eq!(a.to_string(), "broker-1:9092");
    /// ```
    pub fn parse(input: &str) -> Result<Self, ConfigError> {
        let bad = |why: &'static str| ConfigError::InvalidAddress {
            address: input.to_owned(),
            reason: why,
        };
        let s = input.trim();
        let s = match s.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("stellflow") => rest,
            Some(_) => return Err(bad("the only accepted scheme is stellflow://")),
            None => s,
        };
        let s = s.strip_suffix('/').unwrap_or(s);
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in IPv6 address"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| bad("missing :port"))?;
            (host, port)
        } else {
            s.rsplit_once(':').ok_or_else(|| bad("missing :port"))?
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        if host.contains(['/', ' ', ',']) {
            return Err(bad("host contains an illegal character"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| bad("port is not a number 1-65535"))?;
        if port == 0 {
            return Err(bad("port 0 cannot be dialled"));
        }
        Ok(BrokerAddress::new(host, port))
    }
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Parses a comma-separated bootstrap list (`"a:9092, stellflow://b:9092"`), dropping duplicates
/// and keeping the given order. An empty entry (`"a:1,,b:2"`, a trailing comma) is refused:
/// it is usually an address lost in a template.
///
/// ```
/// use stellflow_sansio::parse_bootstrap;
/// let list = parse_bootstrap("a:1,stellflow://b:2, a:1").unwrap();
/// assert_eq!(list.len(), 2);
/// ```
pub fn parse_bootstrap(list: &str) -> Result<Vec<BrokerAddress>, ConfigError> {
    let mut out: Vec<BrokerAddress> = Vec::new();
    if list.trim().is_empty() {
        return Err(ConfigError::EmptyBootstrap);
    }
    for part in list.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(ConfigError::InvalidAddress {
                address: list.to_owned(),
                reason: "the bootstrap list has an empty entry (two commas in a row, or one at an end)",
            });
        }
        let addr = BrokerAddress::parse(part)?;
        if !out.contains(&addr) {
            out.push(addr);
        }
    }
    if out.is_empty() {
        return Err(ConfigError::EmptyBootstrap);
    }
    Ok(out)
}

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
    pub producer: crate::producer::ProducerConfig,
    /// Consumer settings (group, reset policy, commits, fetch sizing).
    pub consumer: crate::consumer::ConsumerConfig,
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
            producer: crate::producer::ProducerConfig::default(),
            consumer: crate::consumer::ConsumerConfig::default(),
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
    fn parses_every_accepted_form() {
        assert_eq!(
            BrokerAddress::parse("h:1").unwrap(),
            BrokerAddress::new("h", 1)
        );
        assert_eq!(
            BrokerAddress::parse(" stellflow://10.0.0.1:9092/ ").unwrap(),
            BrokerAddress::new("10.0.0.1", 9092)
        );
        assert_eq!(
            BrokerAddress::parse("STELLFLOW://h:2").unwrap(),
            BrokerAddress::new("h", 2)
        );
        let v6 = BrokerAddress::parse("[::1]:9092").unwrap();
        assert_eq!(v6, BrokerAddress::new("::1", 9092));
        assert_eq!(v6.to_string(), "[::1]:9092");
    }

    #[test]
    fn rejects_bad_addresses() {
        for bad in [
            "h",
            "h:",
            ":1",
            "h:0",
            "h:65536",
            "h:x",
            "http://h:1",
            "[::1",
            "[::1]9",
            "a b:1",
        ] {
            assert!(BrokerAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bootstrap_lists() {
        let l = parse_bootstrap("a:1, stellflow://b:2 ,a:1").unwrap();
        assert_eq!(
            l,
            vec![BrokerAddress::new("a", 1), BrokerAddress::new("b", 2)]
        );
        assert_eq!(parse_bootstrap("  "), Err(ConfigError::EmptyBootstrap));
        for empty in ["a:1,,b:2", "a:1,", ",a:1", " , "] {
            let e = parse_bootstrap(empty).unwrap_err();
            assert!(e.to_string().contains("empty entry"), "{empty}: {e}");
        }
        assert!(parse_bootstrap("a:1,b").is_err());
    }

    #[test]
    fn defaults_validate() {
        let c = ClientConfig::new("a:1").unwrap();
        assert!(c.validate().is_ok());
        let mut bad = c.clone();
        bad.max_in_flight_per_connection = 0;
        assert!(bad.validate().is_err());
    }
}
