//! What the CLI's test files share: a simulated broker on loopback with one topic.

/// A simulated broker on a free loopback port holding `topic` with one partition, and its
/// address for `--bootstrap`.
pub fn sim_with_topic(topic: &str) -> (stellflow_sim::SimServer, String) {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr().to_string();
    let admin =
        stellflow_blocking::Admin::connect(stellflow_blocking::ClientConfig::new(&addr).unwrap())
            .unwrap();
    admin
        .create_topic(topic, 1, stellflow_blocking::Target::Any)
        .unwrap();
    (server, addr)
}
