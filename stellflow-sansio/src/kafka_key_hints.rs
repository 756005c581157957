//! What to tell a user whose key [`ClientConfig::set`](crate::ClientConfig::set) does not take:
//! the Kafka keys that have no equivalent here with what to use instead, and the known key a
//! misspelt one was probably meant to be.

use crate::config_error::ConfigError;

/// Kafka keys that have no equivalent here, with why and what to use instead. A name ending in
/// `.` stands for every key it starts (`ssl.` is `ssl.truststore.location`, ...).
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "max.partition.fetch.bytes",
        "each Fetch entry reads one whole blob; a partition's share of a request is consumer.max_entries_per_partition blobs",
    ),
    (
        "compression.type",
        "compression is part of the batch format here: stellflow.batch.format=native-gzip compresses with gzip (v1 and native do not compress; there is no snappy, lz4 or zstd); see the user guide's Kafka table",
    ),
    (
        "security.protocol",
        "this server has no TLS or SASL: connections are always plaintext; remove the key",
    ),
    (
        "key.serializer",
        "records are bytes here (Record::new takes &str, bytes, Vec<u8>, Bytes): serialize in your code; remove the key",
    ),
    (
        "value.serializer",
        "records are bytes here (Record::new takes &str, bytes, Vec<u8>, Bytes): serialize in your code; remove the key",
    ),
    (
        "key.deserializer",
        "records are bytes here (ConsumerRecord's key and value are Bytes): deserialize in your code; remove the key",
    ),
    (
        "value.deserializer",
        "records are bytes here (ConsumerRecord's key and value are Bytes): deserialize in your code; remove the key",
    ),
    (
        "partitioner.class",
        "the partitioners are settings: producer.keyed (the Stellflow Java SDK's hash by default, or the Go SDK's) and producer.keyless (sticky by default), or a Partitioner of your own",
    ),
    (
        "interceptor.classes",
        "interceptors are hooks: register them with config.hooks (ProducerHook, ConsumerHook)",
    ),
    (
        "ssl.",
        "this server has no TLS: connections are always plaintext; remove the ssl.* keys",
    ),
    (
        "sasl.",
        "this server has no SASL: the header's auth_context_id names the principal; remove the sasl.* keys",
    ),
];

/// The error for a key the key table does not have: [`ConfigError::Unsupported`] for a Kafka
/// key without an equivalent, else [`ConfigError::UnknownKey`] with the closest of `known`
/// when the key is a near miss.
pub(crate) fn not_a_key(key: &str, known: impl Iterator<Item = &'static str>) -> ConfigError {
    if let Some(reason) = unsupported(key) {
        return ConfigError::Unsupported {
            key: key.to_owned(),
            reason,
        };
    }
    let named = UNSUPPORTED
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !name.ends_with('.'));
    ConfigError::UnknownKey {
        key: key.to_owned(),
        did_you_mean: closest(key, known.chain(named)),
    }
}

/// Why `key` has no equivalent here, when it is a Kafka key of that kind.
fn unsupported(key: &str) -> Option<&'static str> {
    UNSUPPORTED.iter().find_map(|&(name, reason)| {
        let hit = if name.ends_with('.') {
            key.starts_with(name)
        } else {
            key == name
        };
        hit.then_some(reason)
    })
}

/// The candidate closest to `key`, when it is near enough to be what was meant: at most one
/// edit (a letter added, dropped, changed, or two swapped) per eight letters, at least one and
/// at most three, after reading `_`, `-` and capitals as Kafka writes them (`.`, lower case).
fn closest<'k>(key: &str, candidates: impl Iterator<Item = &'k str>) -> Option<&'k str> {
    let typed: Vec<char> = key
        .chars()
        .map(|c| match c {
            '_' | '-' => '.',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let allowed = (1 + typed.len() / 8).min(3);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let wanted: Vec<char> = candidate.chars().collect();
        let distance = edit_distance(&typed, &wanted);
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The number of single-letter insertions, deletions, substitutions and swaps of two
/// neighbours that turn `a` into `b` (optimal string alignment distance).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    // Three rows of the usual table: two back, one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            current[j] = d;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &[
        "linger.ms",
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
    ];

    fn suggestion(key: &str) -> Option<&'static str> {
        match not_a_key(key, KNOWN.iter().copied()) {
            ConfigError::UnknownKey { did_you_mean, .. } => did_you_mean,
            other => panic!("{key}: {other}"),
        }
    }

    #[test]
    fn near_misses_get_the_key_they_meant() {
        for (typed, meant) in [
            ("lingr.ms", "linger.ms"),
            ("linger.msx", "linger.ms"),
            ("lnigre.ms", "linger.ms"),
            ("LINGER_MS", "linger.ms"),
            ("bootstrap.server", "bootstrap.servers"),
            ("bootstrap-servers", "bootstrap.servers"),
            ("group_id", "group.id"),
            ("enable.auto.comit", "enable.auto.commit"),
            ("compresion.type", "compression.type"),
        ] {
            assert_eq!(suggestion(typed), Some(meant), "{typed}");
        }
    }

    #[test]
    fn far_keys_get_no_suggestion() {
        for typed in [
            "foo",
            "batch.num.messages",
            "group.protocol",
            "linger",
            "x.y",
        ] {
            assert_eq!(suggestion(typed), None, "{typed}");
        }
    }

    #[test]
    fn kafka_keys_without_an_equivalent_say_what_to_use() {
        for (key, says) in [
            ("compression.type", "stellflow.batch.format=native-gzip"),
            ("security.protocol", "no TLS or SASL"),
            ("ssl.truststore.location", "no TLS"),
            ("ssl.endpoint.identification.algorithm", "no TLS"),
            ("sasl.mechanism", "no SASL"),
            ("sasl.jaas.config", "no SASL"),
            ("max.partition.fetch.bytes", "whole blob"),
            ("value.serializer", "serialize in your code"),
            ("key.deserializer", "deserialize in your code"),
            ("interceptor.classes", "config.hooks"),
        ] {
            match not_a_key(key, KNOWN.iter().copied()) {
                ConfigError::Unsupported { reason, .. } => {
                    assert!(reason.contains(says), "{key}: {reason}")
                }
                other => panic!("{key}: {other}"),
            }
        }
    }

    #[test]
    fn edit_distances() {
        let d = |a: &str, b: &str| {
            edit_distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("", ""), 0);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("ab", "ba"), 1);
        assert_eq!(d("linger.ms", "linger.ms"), 0);
    }
}
