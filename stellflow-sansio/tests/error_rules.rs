//! One rule per question: every delivery error variant's answer to "may
//! I produce it again" (`is_retriable`) and "may it be in the log" (`outcome_unknown`) is
//! pinned here, as are the consumer's and the request's, and a connection failure keeps its
//! `io::ErrorKind`. ARCHITECTURE decision 3: a record that may have been written is never
//! retriable.
#![allow(clippy::unwrap_used)]

use std::io;
use std::time::Duration;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{
    BrokerAddress, ConsumerError, DeliveryError, DisconnectReason, IoFailure, LeaderlessReason,
    RequestError, TopicPartition,
};

fn addr() -> BrokerAddress {
    BrokerAddress::new("127.0.0.1", 9092)
}

fn timeout() -> RequestError {
    RequestError::Timeout {
        api_key: ApiKey::PRODUCE,
        after: Duration::from_secs(30),
    }
}

fn unreachable() -> RequestError {
    RequestError::Unreachable {
        api_key: ApiKey::PRODUCE,
        address: addr(),
        cause: "connect failed: refused".into(),
    }
}

/// `(name, error, is_retriable, outcome_unknown)` for every variant of [`DeliveryError`], and
/// the wrappers around both kinds of cause.
fn deliveries() -> Vec<(&'static str, DeliveryError, bool, bool)> {
    use DeliveryError as D;
    let maybe = D::MaybeWritten {
        last: Box::new(D::Timeout {
            after: Duration::from_secs(120),
            last: None,
        }),
    };
    let not_replicated = D::NotReplicated {
        offset: 41,
        index: 0,
    };
    vec![
        (
            "not replicated: written, may be truncated",
            not_replicated.clone(),
            false,
            true,
        ),
        (
            "retriable broker code",
            D::Broker {
                code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            },
            true,
            false,
        ),
        (
            "fatal broker code",
            D::Broker {
                code: ErrorCode::INVALID_REQUEST,
            },
            false,
            false,
        ),
        ("request never sent", D::Request(unreachable()), true, false),
        ("request timed out", D::Request(timeout()), false, true),
        (
            "request undecodable",
            D::Request(RequestError::Decode {
                api_key: ApiKey::PRODUCE,
                error: stellflow_proto::DecodeError::invalid("ProduceResponse", "test"),
            }),
            false,
            false,
        ),
        (
            "retries exhausted, last never sent",
            D::RetriesExhausted {
                attempts: 3,
                last: Box::new(D::Request(unreachable())),
            },
            true,
            false,
        ),
        (
            "retries exhausted, last timed out",
            D::RetriesExhausted {
                attempts: 3,
                last: Box::new(D::Request(timeout())),
            },
            false,
            true,
        ),
        (
            "retries exhausted, last not replicated",
            D::RetriesExhausted {
                attempts: 3,
                last: Box::new(not_replicated.clone()),
            },
            false,
            true,
        ),
        (
            "delivery timeout, nothing tried",
            D::Timeout {
                after: Duration::from_secs(1),
                last: None,
            },
            true,
            false,
        ),
        (
            "delivery timeout, last never sent",
            D::Timeout {
                after: Duration::from_secs(1),
                last: Some(Box::new(D::Request(unreachable()))),
            },
            true,
            false,
        ),
        (
            "delivery timeout, last timed out",
            D::Timeout {
                after: Duration::from_secs(1),
                last: Some(Box::new(D::Request(timeout()))),
            },
            false,
            true,
        ),
        (
            "unknown topic",
            D::UnknownTopic { topic: "t".into() },
            false,
            false,
        ),
        (
            "leaderless",
            D::Leaderless {
                topic: "t".into(),
                partition: 0,
                reason: LeaderlessReason::RecoveredAfterRestart { broker: Some(1) },
            },
            true,
            false,
        ),
        ("fenced", D::Fenced, false, false),
        ("producer id conflict", D::ProducerIdConflict, false, false),
        ("encode", D::Encode("bug".into()), false, false),
        ("closed", D::Closed, false, false),
        // Decision 3: a timed-out write is retriable as a request, never as a delivery.
        ("maybe written after a delivery timeout", maybe, false, true),
        (
            "maybe written after a request timeout",
            D::MaybeWritten {
                last: Box::new(D::Request(timeout())),
            },
            false,
            true,
        ),
        (
            "maybe written after a close",
            D::MaybeWritten {
                last: Box::new(D::Closed),
            },
            false,
            true,
        ),
    ]
}

#[test]
fn every_delivery_error_has_one_retry_rule_and_one_outcome_rule() {
    let mut wrong = Vec::new();
    for (name, e, retriable, unknown) in deliveries() {
        if e.is_retriable() != retriable || e.outcome_unknown() != unknown {
            wrong.push(format!(
                "{name}: is_retriable {} (want {retriable}), outcome_unknown {} (want {unknown})",
                e.is_retriable(),
                e.outcome_unknown()
            ));
        }
        // The rule that ties them: a record that may be in the log is never retriable.
        assert!(!(e.is_retriable() && e.outcome_unknown()), "{name}");
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn written_offset_is_only_for_not_replicated() {
    for (name, e, _, _) in deliveries() {
        let want = matches!(e, DeliveryError::NotReplicated { .. }).then_some(41);
        assert_eq!(e.written_offset(), want, "{name}");
    }
}

#[test]
fn request_and_consumer_errors_answer_as_pinned() {
    let requests: Vec<(RequestError, bool, bool)> = vec![
        (timeout(), true, true),
        (
            RequestError::Disconnected {
                api_key: ApiKey::PRODUCE,
                address: addr(),
                cause: "reset".into(),
            },
            true,
            true,
        ),
        (unreachable(), true, false),
        (RequestError::UnknownBroker { broker: 3 }, true, false),
        (
            RequestError::Broker {
                api_key: ApiKey::PRODUCE,
                code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                address: addr(),
            },
            true,
            false,
        ),
        (
            RequestError::UnsupportedApi {
                api_key: ApiKey::PRODUCE,
                address: addr(),
            },
            false,
            false,
        ),
        (RequestError::Closed, false, false),
    ];
    for (e, retriable, unknown) in requests {
        assert_eq!(e.is_retriable(), retriable, "{e:?}");
        assert_eq!(e.outcome_unknown(), unknown, "{e:?}");
    }
    let consumer: Vec<(ConsumerError, bool)> = vec![
        (
            ConsumerError::NotAssigned(TopicPartition::new("t", 0)),
            false,
        ),
        (ConsumerError::NoGroup, false),
        (ConsumerError::Request(timeout()), true),
        (ConsumerError::Request(RequestError::Closed), false),
        (
            ConsumerError::Broker {
                what: "commit",
                code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            },
            true,
        ),
        (
            ConsumerError::Broker {
                what: "commit",
                code: ErrorCode::INVALID_REQUEST,
            },
            false,
        ),
        (ConsumerError::Decode("OffsetCommit"), false),
        (ConsumerError::Closed, false),
        (ConsumerError::MarkingOff, false),
    ];
    for (e, retriable) in consumer {
        assert_eq!(e.is_retriable(), retriable, "{e:?}");
    }
}

#[test]
fn connection_failures_keep_the_io_error_kind() {
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    let reason = DisconnectReason::connect_failed(&refused);
    match &reason {
        DisconnectReason::ConnectFailed(IoFailure { kind, message }) => {
            assert_eq!(*kind, io::ErrorKind::ConnectionRefused);
            assert_eq!(*message, refused.to_string());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reason.to_string(), format!("connect failed: {refused}"));

    let reset = io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by peer");
    let reason = DisconnectReason::io(&reset);
    assert_eq!(
        reason,
        DisconnectReason::Io(IoFailure::new(
            io::ErrorKind::ConnectionReset,
            "connection reset by peer"
        ))
    );
    assert_eq!(reason.to_string(), "I/O error: connection reset by peer");
    assert_eq!(IoFailure::from(reset).kind, io::ErrorKind::ConnectionReset);
}

#[test]
fn a_restarted_broker_names_the_cli_command_that_reasserts_its_leadership() {
    let known = LeaderlessReason::RecoveredAfterRestart { broker: Some(1) }.to_string();
    assert!(
        known.contains("stellflow topics reassert-leaders --broker 1"),
        "{known}"
    );
    assert!(known.contains("AlterPartition"), "{known}");
    let unknown = LeaderlessReason::RecoveredAfterRestart { broker: None }.to_string();
    assert!(
        unknown.contains("stellflow topics reassert-leaders"),
        "{unknown}"
    );
}
