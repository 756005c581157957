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
