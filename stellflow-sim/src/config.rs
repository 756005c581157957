//! Configuration of simulated brokers and clusters, with the real server's defaults.

use std::time::Duration;

/// The real server's default maximum frame size (`stellflow.network.transport.maxFrameLength`):
/// a frame is rejected when `frameLength + 4` exceeds it.
pub const DEFAULT_MAX_FRAME_LENGTH: u64 = 64 * 1024 * 1024;

/// Storage settings of one partition log (PROTOCOL.md §4.1). Defaults are the server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Segment size in bytes (each stored entry costs its blob plus a 32-byte entry header).
    /// Default 32 MiB.
    pub segment_bytes: u64,
    /// Oldest segments are deleted while the partition has more than this many. Default 8.
    pub retention_segments: usize,
    /// Oldest segments are deleted while the partition holds more bytes than this. Default 1 GiB.
    pub retention_bytes: u64,
    /// The oldest segment is deleted once its newest entry is older than this. Default 7 days.
    pub retention_age: Duration,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 32 * 1024 * 1024,
            retention_segments: 8,
            retention_bytes: 1024 * 1024 * 1024,
            retention_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Settings of one simulated broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// The broker id (`stellflow.controlPlane.grpc.brokerId`, default 1).
    pub broker_id: i32,
    /// Advertised host returned by Metadata and FindCoordinator.
    pub host: String,
    /// Advertised port returned by Metadata and FindCoordinator.
    pub port: i32,
    /// Maximum frame size; a request with `frameLength + 4` above it closes the connection.
    pub max_frame_length: u64,
    /// Partition log settings.
    pub log: LogConfig,
}

impl BrokerConfig {
    /// A broker with the given id, advertised as `broker-<id>:9092`, and server defaults.
    pub fn new(broker_id: i32) -> Self {
        BrokerConfig {
            broker_id,
            host: format!("broker-{broker_id}"),
            port: 9092,
            max_frame_length: DEFAULT_MAX_FRAME_LENGTH,
            log: LogConfig::default(),
        }
    }

    /// The advertised `host:port` string.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig::new(1)
    }
}

/// Which partitions and brokers a Metadata answer lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetadataView {
    /// Like the real server: only what this broker holds metadata for (PROTOCOL.md §3.2).
    #[default]
    BrokerLocal,
    /// The controller's full view: every broker and every partition of the cluster.
    ClusterWide,
}

/// Settings of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// One entry per broker. The default is a single broker with id 1.
    pub brokers: Vec<BrokerConfig>,
    /// The Metadata view every broker answers with.
    pub metadata_view: MetadataView,
    /// Broker wall-clock time (ms since the Unix epoch) at the `now` given to the constructor.
    /// Broker append times, ListOffsets LATEST timestamps and time searches use it. Default
    /// 1 700 000 000 000 (November 2023).
    pub wall_clock_start_ms: i64,
}

impl ClusterConfig {
    /// `n` brokers with ids `1..=n`, advertised as `broker-<id>:9092`.
    pub fn with_brokers(n: usize) -> Self {
        ClusterConfig {
            brokers: (1..=n).map(|i| BrokerConfig::new(i as i32)).collect(),
            ..ClusterConfig::default()
        }
    }

    /// Applies `log` to every broker.
    pub fn log_config(mut self, log: LogConfig) -> Self {
        for b in &mut self.brokers {
            b.log = log.clone();
        }
        self
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            brokers: vec![BrokerConfig::default()],
            metadata_view: MetadataView::BrokerLocal,
            wall_clock_start_ms: 1_700_000_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_server() {
        let c = ClusterConfig::default();
        assert_eq!(c.brokers.len(), 1);
        assert_eq!(c.brokers[0].broker_id, 1);
        assert_eq!(c.brokers[0].address(), "broker-1:9092");
        assert_eq!(c.brokers[0].log.segment_bytes, 33_554_432);
        assert_eq!(c.brokers[0].max_frame_length, 67_108_864);
        let c3 = ClusterConfig::with_brokers(3);
        assert_eq!(c3.brokers[2].broker_id, 3);
    }
}
