//! The `fetch-entries-ascending` invariant: in every Fetch a client sends, each partition's
//! entries carry ascending consecutive offsets (DESIGN §3.15). The server hands a partition's
//! records to its entries in order of the entries that read something (PROTOCOL.md §3.4), so
//! an empty entry before a non-empty one would take its bytes and shift every later entry.

use bytes::Bytes;
use stellflow_proto::messages::FetchRequest;
use stellflow_proto::{Reader, Wire};

/// The invariant's name in violations.
pub const INVARIANT: &str = "fetch-entries-ascending";

/// Checks one Fetch request body; `Err` names the first partition whose entries are not
/// `o, o+1, …`, listed together in one topic entry.
pub fn check_fetch_request(body: &Bytes) -> Result<(), (&'static str, String)> {
    let req = FetchRequest::decode(&mut Reader::new(body.clone()))
        .map_err(|e| ("well-formed-requests", format!("Fetch body: {e}")))?;
    let mut seen: Vec<(Option<&str>, i32)> = Vec::new();
    for t in &req.topic_partitions {
        let topic = t.topic.as_deref();
        let mut last: Option<(i32, i64)> = None;
        for p in &t.partitions {
            match last {
                Some((part, offset)) if part == p.partition => {
                    if p.fetch_offset != offset.saturating_add(1) {
                        return Err((
                            INVARIANT,
                            format!(
                                "{}-{}: entry at {} follows {offset}",
                                topic.unwrap_or("?"),
                                p.partition,
                                p.fetch_offset
                            ),
                        ));
                    }
                }
                _ => {
                    if seen.contains(&(topic, p.partition)) {
                        return Err((
                            INVARIANT,
                            format!(
                                "{}-{}: entries not listed together",
                                topic.unwrap_or("?"),
                                p.partition
                            ),
                        ));
                    }
                    seen.push((topic, p.partition));
                }
            }
            last = Some((p.partition, p.fetch_offset));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use stellflow_proto::messages::{FetchPartition, FetchTopic};

    fn body(topics: &[(&str, &[(i32, i64)])]) -> Bytes {
        let req = FetchRequest {
            replica_id: -1,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1,
            isolation_level: 0,
            session_id: 0,
            topic_partitions: topics
                .iter()
                .map(|(t, parts)| FetchTopic {
                    topic: Some((*t).into()),
                    partitions: parts
                        .iter()
                        .map(|&(partition, fetch_offset)| FetchPartition {
                            partition,
                            current_leader_epoch: -1,
                            fetch_offset,
                            log_start_offset: -1,
                            partition_max_bytes: 1,
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut b = BytesMut::new();
        req.encode(&mut b);
        b.freeze()
    }

    #[test]
    fn consecutive_entries_pass_others_fail() {
        assert!(check_fetch_request(&body(&[("a", &[(0, 5), (0, 6), (1, 0)])])).is_ok());
        assert!(check_fetch_request(&body(&[("a", &[(0, 5)]), ("b", &[(0, 5)])])).is_ok());
        for bad in [
            body(&[("a", &[(0, 0), (0, 1), (0, 3)])]),
            body(&[("a", &[(0, 1), (0, 0)])]),
            body(&[("a", &[(0, 0), (1, 0), (0, 1)])]),
            body(&[("a", &[(0, 0)]), ("a", &[(0, 1)])]),
        ] {
            let err = check_fetch_request(&bad).unwrap_err();
            assert_eq!(err.0, INVARIANT, "{err:?}");
        }
    }
}
