//! Kafka-style configuration keys (`bootstrap.servers`, `linger.ms`, ...): the one table that
//! maps each key to its [`ClientConfig`] field, used by [`ClientConfig::set`],
//! [`ClientConfig::from_kafka_properties`], [`ClientConfig::to_kafka_properties`], the `serde`
//! feature (`ClientConfig` as a map of these keys: `Serialize`/`Deserialize`) and the CLI's
//! `-X key=value`.
//!
//! Adding a key is one line in [`KEYS`]: its name, how its value is written (a [`Codec`]) and
//! the field(s) it sets (a key may set several fields; it reads back from the first).

use crate::address::{BrokerAddress, parse_bootstrap};
use crate::config::ClientConfig;
use crate::config_error::ConfigError;
use crate::consumer_config::OffsetReset;
use crate::kafka_key_hints::not_a_key;
use crate::producer_config::{Acks, BatchFormat};
use std::time::Duration;
use stellflow_proto::record::Compression;

/// What a key's value is beside its text, for formats that have numbers and booleans (the
/// `serde` feature writes `linger.ms` as `5`, not `"5"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A whole number.
    Number,
    /// `true` or `false`.
    Bool,
    /// Anything else.
    Text,
}

/// How a key's value is written as text.
trait Codec {
    /// The field's type.
    type T;
    /// What the text is.
    const KIND: Kind = Kind::Text;
    /// Parses the text, or says what the key takes.
    fn parse(s: &str) -> Result<Self::T, &'static str>;
    /// Writes the value back (so that `parse(show(v)) == v`).
    fn show(v: &Self::T) -> String;
}

/// Milliseconds, as a whole number.
struct Ms;
impl Codec for Ms {
    const KIND: Kind = Kind::Number;
    type T = Duration;
    fn parse(s: &str) -> Result<Duration, &'static str> {
        s.parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| "takes a whole number of milliseconds")
    }
    fn show(v: &Duration) -> String {
        v.as_millis().to_string()
    }
}

/// `true` or `false`.
struct Bool;
impl Codec for Bool {
    const KIND: Kind = Kind::Bool;
    type T = bool;
    fn parse(s: &str) -> Result<bool, &'static str> {
        match s {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("takes true or false"),
        }
    }
    fn show(v: &bool) -> String {
        v.to_string()
    }
}

/// `true` or `false`, stored negated (`enable.auto.offset.store` is `!commit_marked_only`).
struct NotBool;
impl Codec for NotBool {
    const KIND: Kind = Kind::Bool;
    type T = bool;
    fn parse(s: &str) -> Result<bool, &'static str> {
        Bool::parse(s).map(|b| !b)
    }
    fn show(v: &bool) -> String {
        (!v).to_string()
    }
}

/// A count or a byte size.
struct Usize;
impl Codec for Usize {
    const KIND: Kind = Kind::Number;
    type T = usize;
    fn parse(s: &str) -> Result<usize, &'static str> {
        s.parse().map_err(|_| "takes a whole number")
    }
    fn show(v: &usize) -> String {
        v.to_string()
    }
}

/// A count up to `u32::MAX`.
struct U32;
impl Codec for U32 {
    const KIND: Kind = Kind::Number;
    type T = u32;
    fn parse(s: &str) -> Result<u32, &'static str> {
        s.parse()
            .map_err(|_| "takes a whole number up to 4294967295")
    }
    fn show(v: &u32) -> String {
        v.to_string()
    }
}

/// Text; empty for none.
struct OptString;
impl Codec for OptString {
    type T = Option<String>;
    fn parse(s: &str) -> Result<Option<String>, &'static str> {
        Ok((!s.is_empty()).then(|| s.to_owned()))
    }
    fn show(v: &Option<String>) -> String {
        v.clone().unwrap_or_default()
    }
}

/// A partition count, or empty for none.
struct Partitions;
impl Codec for Partitions {
    type T = Option<i32>;
    fn parse(s: &str) -> Result<Option<i32>, &'static str> {
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse::<i32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err("takes a partition count (a positive whole number), or nothing for none"),
        }
    }
    fn show(v: &Option<i32>) -> String {
        v.map(|n| n.to_string()).unwrap_or_default()
    }
}

/// A comma-separated `host:port` list.
struct Bootstrap;
impl Codec for Bootstrap {
    type T = Vec<BrokerAddress>;
    fn parse(s: &str) -> Result<Vec<BrokerAddress>, &'static str> {
        parse_bootstrap(s).map_err(|_| "takes a comma-separated list of host:port")
    }
    fn show(v: &Vec<BrokerAddress>) -> String {
        let list: Vec<String> = v.iter().map(ToString::to_string).collect();
        list.join(",")
    }
}

/// `0`, `1`, `all` (or `-1`).
struct AcksCodec;
impl Codec for AcksCodec {
    type T = Acks;
    fn parse(s: &str) -> Result<Acks, &'static str> {
        match s {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            _ => Err("takes 0, 1, all or -1"),
        }
    }
    fn show(v: &Acks) -> String {
        match v {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
        .to_owned()
    }
}

/// `earliest`, `latest`, `none`.
struct Reset;
impl Codec for Reset {
    type T = OffsetReset;
    fn parse(s: &str) -> Result<OffsetReset, &'static str> {
        match s {
            "earliest" => Ok(OffsetReset::Earliest),
            "latest" => Ok(OffsetReset::Latest),
            "none" => Ok(OffsetReset::None),
            _ => Err("takes earliest, latest or none"),
        }
    }
    fn show(v: &OffsetReset) -> String {
        match v {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        }
        .to_owned()
    }
}

/// `v1`, `native`, `native-gzip`.
struct Format;
impl Codec for Format {
    type T = BatchFormat;
    fn parse(s: &str) -> Result<BatchFormat, &'static str> {
        match s {
            "v1" => Ok(BatchFormat::V1),
            "native" => Ok(BatchFormat::Native(Compression::None)),
            "native-gzip" => Ok(BatchFormat::Native(Compression::Gzip)),
            _ => Err("takes v1, native or native-gzip"),
        }
    }
    fn show(v: &BatchFormat) -> String {
        match v {
            BatchFormat::V1 => "v1",
            BatchFormat::Native(Compression::Gzip) => "native-gzip",
            BatchFormat::Native(_) => "native",
        }
        .to_owned()
    }
}

/// One key: its name, how to set it and how to read it back.
pub(crate) struct Key {
    /// The Kafka-style name.
    pub(crate) name: &'static str,
    set: fn(&mut ClientConfig, &str) -> Result<(), &'static str>,
    get: fn(&ClientConfig) -> String,
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    kind: Kind,
}

/// `key!("name", Codec, field.path [, more.fields ...])`: one row of [`KEYS`].
macro_rules! key {
    ($name:literal, $codec:ident, $($first:ident).+ $(, [$($more:ident).+])*) => {
        Key {
            name: $name,
            set: |c, s| {
                let v = $codec::parse(s)?;
                $(c.$($more).+ = v.clone();)*
                c.$($first).+ = v;
                Ok(())
            },
            get: |c| $codec::show(&c.$($first).+),
            kind: $codec::KIND,
        }
    };
}

/// Every key, in the order of the user guide's Kafka table.
pub(crate) const KEYS: &[Key] = &[
    key!("bootstrap.servers", Bootstrap, bootstrap),
    key!("client.id", OptString, header.client_id),
    key!("request.timeout.ms", Ms, request_timeout),
    key!("metadata.max.age.ms", Ms, metadata_max_age),
    key!("reconnect.backoff.ms", Ms, reconnect_backoff),
    key!("reconnect.backoff.max.ms", Ms, reconnect_backoff_max),
    key!(
        "retry.backoff.ms",
        Ms,
        metadata_refresh_backoff,
        [producer.retry_backoff],
        [consumer.rejoin_backoff]
    ),
    key!(
        "retry.backoff.max.ms",
        Ms,
        metadata_refresh_backoff_max,
        [producer.retry_backoff_max],
        [consumer.join_retry_backoff_max]
    ),
    key!("acks", AcksCodec, producer.acks),
    key!("linger.ms", Ms, producer.linger),
    key!("batch.size", Usize, producer.batch_size),
    key!("buffer.memory", Usize, producer.buffer_memory),
    key!("max.request.size", Usize, producer.max_request_size),
    key!(
        "max.in.flight.requests.per.connection",
        Usize,
        producer.max_in_flight_per_partition
    ),
    key!("retries", U32, producer.retries),
    key!("delivery.timeout.ms", Ms, producer.delivery_timeout),
    key!("enable.idempotence", Bool, producer.idempotence),
    key!("stellflow.batch.format", Format, producer.format),
    key!("max.block.ms", Ms, producer.max_block),
    key!("max.poll.records", Usize, consumer.max_poll_records),
    // Liveness settings (one block).
    key!(
        "socket.connection.setup.timeout.ms",
        Ms,
        connection_setup_timeout
    ),
    key!("stellflow.unreachable.timeout.ms", Ms, unreachable_timeout),
    key!(
        "stellflow.metadata.max.wait.ms",
        Ms,
        producer.metadata_max_wait
    ),
    key!(
        "stellflow.create.missing.topics",
        Partitions,
        producer.create_missing_topics
    ),
    key!("stellflow.ack.timeout.ms", Ms, producer.ack_timeout),
    key!("group.id", OptString, consumer.group_id),
    key!("auto.offset.reset", Reset, consumer.auto_offset_reset),
    key!("enable.auto.commit", Bool, consumer.enable_auto_commit),
    key!("auto.commit.interval.ms", Ms, consumer.auto_commit_interval),
    key!(
        "enable.auto.offset.store",
        NotBool,
        consumer.commit_marked_only
    ),
    key!("session.timeout.ms", Ms, consumer.session_timeout),
    key!("heartbeat.interval.ms", Ms, consumer.heartbeat_interval),
    key!("fetch.max.bytes", Usize, consumer.fetch_max_bytes),
    key!("fetch.max.wait.ms", Ms, consumer.fetch_max_wait),
];

impl ClientConfig {
    /// Sets one Kafka-style key (rdkafka's `ClientConfig::set`): `bootstrap.servers`,
    /// `client.id`, `acks`, `linger.ms`, `enable.idempotence`, `group.id`,
    /// `auto.offset.reset`, `enable.auto.commit`, ... — every key of the user guide's Kafka
    /// table. The value is checked when it is set; the whole configuration when the client
    /// starts ([`ClientConfig::validate`]). An unknown key fails with
    /// [`ConfigError::UnknownKey`], naming the known key it is a near miss of; a Kafka key
    /// that has no equivalent here (`compression.type`, `security.protocol`, `ssl.*`,
    /// `sasl.*`, ...) with [`ConfigError::Unsupported`], saying what to use instead.
    ///
    /// ```
    /// # use stellflow_sansio::{Acks, ClientConfig, ConfigError};
    /// let mut config = ClientConfig::new("127.0.0.1:9092").unwrap();
    /// config.set("acks", "1").unwrap();
    /// config.set("group.id", "billing").unwrap();
    /// assert_eq!(config.producer.acks, Acks::Leader);
    /// assert!(matches!(config.set("linger.ms", "soon"), Err(ConfigError::BadValue { .. })));
    /// let e = config.set("lingr.ms", "5").unwrap_err();
    /// assert!(matches!(e, ConfigError::UnknownKey { did_you_mean: Some("linger.ms"), .. }));
    /// assert!(matches!(config.set("compression.type", "gzip"), Err(ConfigError::Unsupported { .. })));
    /// ```
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let Some(k) = KEYS.iter().find(|k| k.name == key) else {
            return Err(not_a_key(key, KEYS.iter().map(|k| k.name)));
        };
        (k.set)(self, value.trim()).map_err(|reason| ConfigError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        })
    }

    /// The value of a Kafka-style key as text (`None` for an unknown key).
    pub fn get(&self, key: &str) -> Option<String> {
        KEYS.iter().find(|k| k.name == key).map(|k| (k.get)(self))
    }

    /// A configuration from Kafka-style `key = value` pairs (from a properties file, the
    /// environment, `-X` flags); `bootstrap.servers` is required, everything else keeps its
    /// default. The result is validated.
    ///
    /// ```
    /// # use stellflow_sansio::ClientConfig;
    /// let config = ClientConfig::from_kafka_properties([
    ///     ("bootstrap.servers", "a:9092,b:9092"),
    ///     ("enable.idempotence", "true"),
    ///     ("client.id", "billing-1"),
    /// ])
    /// .unwrap();
    /// assert!(config.producer.idempotence);
    /// assert_eq!(config.bootstrap.len(), 2);
    /// ```
    pub fn from_kafka_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ClientConfig, ConfigError> {
        let properties: Vec<(K, V)> = properties.into_iter().collect();
        let bootstrap = properties
            .iter()
            .rfind(|(k, _)| k.as_ref() == "bootstrap.servers")
            .ok_or(ConfigError::EmptyBootstrap)?;
        let mut config = ClientConfig::new(bootstrap.1.as_ref())?;
        for (k, v) in &properties {
            config.set(k.as_ref(), v.as_ref())?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Every Kafka-style key with its current value, in table order: what
    /// [`ClientConfig::from_kafka_properties`] reads back into an equal configuration.
    pub fn to_kafka_properties(&self) -> Vec<(&'static str, String)> {
        KEYS.iter().map(|k| (k.name, (k.get)(self))).collect()
    }

    /// The names of every Kafka-style key [`ClientConfig::set`] takes.
    pub fn kafka_keys() -> impl Iterator<Item = &'static str> {
        KEYS.iter().map(|k| k.name)
    }
}

/// `ClientConfig` as a flat map of Kafka-style keys (the `serde` feature): what a TOML, JSON
/// or YAML configuration file holds.
#[cfg(feature = "serde")]
mod with_serde {
    use super::{KEYS, Kind};
    use crate::config::ClientConfig;
    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde::ser::{Serialize, SerializeMap, Serializer};
    use std::fmt;

    /// Every key of the table with its value: numbers as numbers, `true`/`false` as
    /// booleans, the rest as text (an unset `client.id` or `group.id` as `""`). Settings
    /// without a key (hooks, the header's other fields, ...) are not written; a file read back
    /// gives them their defaults.
    impl Serialize for ClientConfig {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut map = serializer.serialize_map(Some(KEYS.len()))?;
            for key in KEYS {
                let text = (key.get)(self);
                match (key.kind, text.parse::<u64>()) {
                    (Kind::Number, Ok(n)) => map.serialize_entry(key.name, &n)?,
                    (Kind::Bool, _) => map.serialize_entry(key.name, &(text == "true"))?,
                    _ => map.serialize_entry(key.name, &text)?,
                }
            }
            map.end()
        }
    }

    /// A map of Kafka-style keys, read through [`ClientConfig::from_kafka_properties`] (so
    /// `bootstrap.servers` is required, an unknown key or a bad value is an error naming it,
    /// and the result is validated). A value may be text, a number or a boolean, each taken
    /// as its text (`5` and `"5"` alike), or a list of those (joined with commas:
    /// `"bootstrap.servers": ["a:9092", "b:9092"]`). Nested tables are read as dotted keys,
    /// so TOML's `linger.ms = 5` (a table `linger` holding `ms`) works like
    /// `"linger.ms" = 5`.
    ///
    /// ```
    /// # use stellflow_sansio::ClientConfig;
    /// let config: ClientConfig = serde_json::from_str(
    ///     r#"{"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5, "enable.idempotence": true}"#,
    /// )
    /// .unwrap();
    /// assert_eq!(config.producer.linger, std::time::Duration::from_millis(5));
    /// let e = serde_json::from_str::<ClientConfig>(r#"{"bootstrap.servers": "a:1", "lingr.ms": 5}"#)
    ///     .unwrap_err();
    /// assert!(e.to_string().contains("\"lingr.ms\""));
    /// ```
    impl<'de> Deserialize<'de> for ClientConfig {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let Node::Table(entries) = deserializer.deserialize_map(NodeVisitor)? else {
                return Err(de::Error::custom("a configuration must be a map of keys"));
            };
            let mut properties = Vec::new();
            flatten(String::new(), entries, &mut properties).map_err(de::Error::custom)?;
            if !properties.iter().any(|(k, _)| k == "bootstrap.servers") {
                return Err(de::Error::custom(
                    "missing key bootstrap.servers (a comma-separated list of host:port)",
                ));
            }
            ClientConfig::from_kafka_properties(properties).map_err(de::Error::custom)
        }
    }

    /// One value of the file: text, a list of texts, or a table.
    enum Node {
        Text(String),
        List(Vec<String>),
        Table(Vec<(String, Node)>),
    }

    /// `entries` under `prefix` as `key = text` pairs.
    fn flatten(
        prefix: String,
        entries: Vec<(String, Node)>,
        out: &mut Vec<(String, String)>,
    ) -> Result<(), String> {
        for (key, node) in entries {
            let key = if prefix.is_empty() {
                key
            } else {
                format!("{prefix}.{key}")
            };
            match node {
                Node::Text(text) => out.push((key, text)),
                Node::List(items) => out.push((key, items.join(","))),
                Node::Table(inner) if inner.is_empty() => {
                    return Err(format!("key {key:?} holds an empty table, not a value"));
                }
                Node::Table(inner) => flatten(key, inner, out)?,
            }
        }
        Ok(())
    }

    struct NodeVisitor;

    impl<'de> Visitor<'de> for NodeVisitor {
        type Value = Node;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("text, a number, a boolean, a list of those, or a table of keys")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
            Ok(Node::Text(v.to_owned()))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
            Ok(Node::Text(v))
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
            Ok(Node::Text(v.to_string()))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
            Ok(Node::Text(v.to_string()))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
            Ok(Node::Text(v.to_string()))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
            // `5.0` reads as `5`; `5.5` stays `5.5`, which a whole-number key refuses.
            Ok(Node::Text(v.to_string()))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
            let mut items = Vec::new();
            while let Some(node) = seq.next_element_seed(NodeSeed)? {
                match node {
                    Node::Text(text) => items.push(text),
                    _ => return Err(de::Error::custom("a list may hold only plain values")),
                }
            }
            Ok(Node::List(items))
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
            let mut entries = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                let node = map
                    .next_value_seed(NodeSeed)
                    .map_err(|e| de::Error::custom(format!("key {key:?}: {e}")))?;
                entries.push((key, node));
            }
            Ok(Node::Table(entries))
        }
    }

    /// Reads one [`Node`] (self-describing formats only, as a configuration file is).
    struct NodeSeed;

    impl<'de> de::DeserializeSeed<'de> for NodeSeed {
        type Value = Node;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
            deserializer.deserialize_any(NodeVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value for every key that differs from the default, so a key that sets the wrong
    /// field (or nothing) shows.
    fn changed(key: &str, default: &str) -> String {
        match key {
            "bootstrap.servers" => "x:1,y:2".into(),
            "client.id" | "group.id" => "someone".into(),
            "acks" => "1".into(),
            "auto.offset.reset" => "earliest".into(),
            "stellflow.batch.format" => "native-gzip".into(),
            "heartbeat.interval.ms" => "2000".into(),
            "retries" => "7".into(),
            "max.in.flight.requests.per.connection" => "2".into(),
            "stellflow.create.missing.topics" => "3".into(),
            _ if default == "true" => "false".into(),
            _ if default == "false" => "true".into(),
            _ => {
                let n: u64 = default
                    .parse()
                    .unwrap_or_else(|_| panic!("{key}={default}"));
                (n + 1).to_string()
            }
        }
    }

    #[test]
    fn every_key_round_trips() {
        let default = ClientConfig::new("a:1").unwrap();
        let mut names: Vec<&str> = ClientConfig::kafka_keys().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "a key is listed twice");
        for (key, value) in default.to_kafka_properties() {
            let want = changed(key, &value);
            assert_ne!(want, value, "{key}");
            let mut c = default.clone();
            c.set(key, &want).unwrap();
            assert_eq!(c.get(key).as_deref(), Some(want.as_str()), "{key}");
            let props = c.to_kafka_properties();
            let back = ClientConfig::from_kafka_properties(props.clone());
            // Some changed values alone are invalid together with the defaults (none today).
            let back = back.unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(back.to_kafka_properties(), props, "{key}");
            assert_eq!(format!("{back:?}"), format!("{c:?}"), "{key}");
        }
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        let mut c = ClientConfig::new("a:1").unwrap();
        let e = c.set("lingr.ms", "5").unwrap_err();
        assert!(e.to_string().contains("\"lingr.ms\""), "{e}");
        assert!(e.to_string().contains("did you mean \"linger.ms\"?"), "{e}");
        let e = c.set("compression.type", "gzip").unwrap_err();
        assert!(e.to_string().contains("stellflow.batch.format"), "{e}");
        let e = c.set("security.protocol", "PLAINTEXT").unwrap_err();
        assert!(e.to_string().contains("no TLS or SASL"), "{e}");
        let e = c.set("linger.ms", "soon").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("linger.ms") && text.contains("\"soon\""),
            "{text}"
        );
        let e = c.set("acks", "2").unwrap_err();
        assert!(e.to_string().contains("0, 1, all"), "{e}");
        let e = c.set("max.partition.fetch.bytes", "1").unwrap_err();
        assert!(matches!(e, ConfigError::Unsupported { .. }), "{e}");
        assert_eq!(
            ClientConfig::from_kafka_properties([("acks", "1")]).unwrap_err(),
            ConfigError::EmptyBootstrap
        );
        // A valid value that breaks a rule of the whole configuration is caught too.
        let e = ClientConfig::from_kafka_properties([
            ("bootstrap.servers", "a:1"),
            ("heartbeat.interval.ms", "60000"),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("heartbeat_interval"), "{e}");
    }
}
