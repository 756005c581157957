//! Every adapter's handles have every method of the one API (a compile-time check: a missing
//! or renamed method fails to build), and no adapter has a public method the others lack
//! (read from the method names rustdoc lists: `check-api-names.sh` beside this crate).

/// The one API: each handle's methods, by name.
macro_rules! api {
    ($($krate:ident),*) => {$(
        #[test]
        fn $krate() {
            use $krate as sf;
            let _ = (
                sf::Client::connect, sf::Client::connect_with, sf::Client::producer,
                sf::Client::consumer, sf::Client::admin, sf::Client::metadata,
                sf::Client::refresh_metadata, sf::Client::counters, sf::Client::connect_error,
                sf::Client::close,
            );
            let _ = (
                sf::Producer::connect, sf::Producer::connect_with, sf::Producer::client,
                sf::Producer::send, sf::Producer::enqueue, sf::Producer::flush,
                sf::Producer::close, sf::Delivery::wait, sf::Delivery::try_wait,
            );
            let _ = (
                sf::Consumer::connect, sf::Consumer::connect_with, sf::Consumer::client,
                sf::Consumer::assign, sf::Consumer::subscribe, sf::Consumer::assignment,
                sf::Consumer::poll, sf::Consumer::poll_max, sf::Consumer::recv,
                sf::Consumer::commit_sync, sf::Consumer::commit_positions,
                sf::Consumer::commit_async, sf::Consumer::seek,
            );
            let _ = (
                sf::Consumer::offsets_for_times, sf::Consumer::position,
                sf::Consumer::committed, sf::Consumer::lag, sf::Consumer::pause,
                sf::Consumer::resume, sf::Consumer::events, sf::Consumer::close,
            );
            let _ = (
                sf::Admin::connect, sf::Admin::connect_with, sf::Admin::client,
                sf::Admin::call::<sf::ClusterStatus>, sf::Admin::api_versions, sf::Admin::describe_cluster,
                sf::Admin::health_check, sf::Admin::describe_topics, sf::Admin::create_topic,
                sf::Admin::delete_topic, sf::Admin::alter_partition,
            );
            let _ = (
                sf::Admin::list_offsets, sf::Admin::committed_offsets,
                sf::Admin::decommission_broker, sf::Admin::reassert_leadership,
                sf::Admin::metadata, sf::Admin::refresh_metadata, sf::Admin::counters,
            );
        }
    )*};
}

api!(stellflow_tokio, stellflow_smol, stellflow_blocking);

/// Types a user meets in the handles' signatures and in the fields and methods of what they
/// return, named through each adapter alone (a compile-time check).
macro_rules! reachable {
    ($($name:ident: $krate:ident),*) => {$(
        #[allow(dead_code, clippy::type_complexity)]
        fn $name(
            _: ($krate::Record, $krate::ConsumerRecord, $krate::Headers, $krate::Header),
            _: ($krate::BlobFormat, $krate::StrBytes, $krate::NString, $krate::NBytes),
            _: ($krate::TopicInfo, $krate::DecodeError, $krate::RecordHeader<'static>),
            _: ($krate::ClusterMetadata, $krate::PartitionInfo, $krate::ConnectionError),
            _: &dyn $krate::Stream<Item = $krate::Result<$krate::ConsumerRecord>>,
        ) {
        }
    )*};
}

reachable!(tokio_types: stellflow_tokio, smol_types: stellflow_smol);

#[allow(dead_code)]
fn blocking_types(
    _: (stellflow_blocking::Record, stellflow_blocking::Headers),
    _: (
        stellflow_blocking::TopicInfo,
        stellflow_blocking::DecodeError,
    ),
    _: (stellflow_blocking::NString, stellflow_blocking::NBytes),
    _: stellflow_blocking::RecordHeader<'static>,
) {
}

/// Every stellflow type reachable from what the adapters export — the types in the public API
/// record of `stellflow-async` (whose prelude and handles tokio and smol re-export) and of
/// `stellflow-blocking` (`public-api/`), then the fields and methods of each type found, and
/// so on — is exported by the adapters' shared prelude (`runtime-async/src/lib.rs`) or is an
/// adapter's own handle, except the codec's own (`Reader`, `FieldValue`: the protocol traits'
/// methods on `ApiKey` and `ErrorCode`) and the seal of a sealed trait.
#[test]
fn every_reachable_type_is_exported() {
    use std::collections::{BTreeMap, BTreeSet};
    type Node = (String, String); // crate, type name
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let lib = read("runtime-async/src/lib.rs");
    let prelude = lib
        .split("pub mod prelude {")
        .nth(1)
        .and_then(|s| s.split("\n}\n").next())
        .expect("the prelude module");
    let exported: BTreeSet<&str> = prelude
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect();
    // Every `stellflow_*::path::Type` of a line, as (crate, first capitalised segment).
    let types_in = |line: &str| -> Vec<Node> {
        let mut out = Vec::new();
        for (at, _) in line.match_indices("stellflow_") {
            let path: String = line[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut parts = path.trim_end_matches(':').split("::");
            let krate = parts.next().unwrap_or_default().to_owned();
            if let Some(name) = parts.find(|s| s.starts_with(char::is_uppercase)) {
                out.push((krate, name.to_owned()));
            }
        }
        out
    };
    let mut lines_of: BTreeMap<Node, Vec<String>> = BTreeMap::new();
    let mut todo = Vec::new();
    for file in [
        "stellflow-sansio",
        "stellflow-proto",
        "stellflow-async",
        "stellflow-blocking",
    ] {
        for line in read(&format!("public-api/{file}.txt")).lines() {
            if line.starts_with("impl") {
                continue; // trait impls name their traits' own types
            }
            let types = types_in(line);
            if let Some(subject) = types.first() {
                lines_of
                    .entry(subject.clone())
                    .or_default()
                    .push(line.to_owned());
            }
            if file == "stellflow-async" || file == "stellflow-blocking" {
                todo.extend(types);
            }
        }
    }
    // The handles are each adapter's own names, beside the prelude.
    let own = ["Client", "Producer", "Consumer", "Admin"];
    let allowed = ["Reader", "FieldValue", "Sealed"];
    let (mut seen, mut missing) = (BTreeSet::new(), BTreeMap::new());
    while let Some(node) = todo.pop() {
        if !seen.insert(node.clone()) {
            continue;
        }
        for line in lines_of.get(&node).into_iter().flatten() {
            for found in types_in(line) {
                let name = found.1.as_str();
                let adapter_side = found.0 == "stellflow_async" || found.0 == "stellflow_blocking";
                let ok = exported.contains(name)
                    || allowed.contains(&name)
                    || (adapter_side && own.contains(&name));
                if !ok {
                    missing.entry(found.clone()).or_insert_with(|| line.clone());
                }
                todo.push(found);
            }
        }
    }
    assert!(
        seen.len() > 60,
        "the walk reached only {} types",
        seen.len()
    );
    assert!(
        missing.is_empty(),
        "types reachable from the adapters but not exported by them: {missing:#?}"
    );
}
