//! [`ConfigError`]: the configuration cannot work. It sits below every module that parses or
//! checks a setting (the broker address, every config struct), and imports nothing of the crate.

/// The configuration cannot work. Fix the value named in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The bootstrap list names no broker.
    #[error("the bootstrap list is empty: give at least one host:port")]
    EmptyBootstrap,
    /// A bootstrap entry is not `host:port` or `stellflow://host:port`.
    #[error("invalid broker address {address:?}: {reason}")]
    InvalidAddress {
        /// The entry as given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A setting is out of range.
    #[error("invalid setting {field}: {reason}")]
    Invalid {
        /// The configuration field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A Kafka-style key this client does not know ([`crate::ClientConfig::set`]); the
    /// user guide's Kafka table lists the keys it does.
    #[error(
        "unknown configuration key {key:?}{} (the user guide's Kafka table lists the known keys)",
        did_you_mean.map(|k| format!(": did you mean {k:?}?")).unwrap_or_default()
    )]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The known key it is closest to, when it is a near miss (a letter or two off, or
        /// written with `_` or `-` for `.`, or in capitals).
        did_you_mean: Option<&'static str>,
    },
    /// A Kafka key that has no equivalent here, and why.
    #[error("configuration key {key:?} has no equivalent in this client: {reason}")]
    Unsupported {
        /// The key.
        key: String,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// A `.properties` text that cannot be read as one
    /// ([`crate::ClientConfig::from_properties`]).
    #[error("properties line {line}: {reason}")]
    PropertiesSyntax {
        /// The line, counted from 1.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A configuration file that cannot be read
    /// ([`crate::ClientConfig::from_properties_file`]).
    #[error("cannot read the configuration file {path}: {reason}")]
    ReadFile {
        /// The file as given.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A Kafka-style key with a value it cannot take.
    #[error("bad value {value:?} for {key}: {reason}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What the key takes.
        reason: &'static str,
    },
}

impl ConfigError {
    /// Never: the configuration must be fixed first.
    pub fn is_retriable(&self) -> bool {
        false
    }
}
