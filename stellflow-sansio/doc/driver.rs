use bytes::BytesMut;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_sansio::{Client, ClientConfig, DisconnectReason, Event, Output, Target};
use stellflow_sim::SimCluster;

fn main() {
    let mut now = Instant::now();
    let mut broker = SimCluster::single(now, 1); // advertises broker-1:9092
    let mut client = Client::new(ClientConfig::new("broker-1:9092").unwrap(), now, 42).unwrap();
    let mut links = HashMap::new(); // client ConnId -> sim ConnId
    let mut buf = BytesMut::new();
    let mut asked = None;

    'run: for _ in 0..1000 {
        if asked.is_none() && !client.metadata().brokers.is_empty() {
            asked = Some(client.describe_cluster(now, Target::Any).unwrap());
        }
        // The drain: every output of the client until it says when to wake.
        let wake_at = loop {
            buf.clear();
            match client.poll_output(now, &mut buf) {
                Output::Connect(req) => match broker.connect_addr(&req.address.to_string(), now) {
                    Ok(sim_conn) => {
                        links.insert(req.conn, sim_conn);
                        client.handle_connected(req.conn, now);
                    }
                    Err(e) => client.handle_disconnected(
                        req.conn, now,
                        DisconnectReason::connect_failed(&std::io::Error::other(e.to_string()))),
                },
                Output::Close(close) => {
                    if let Some(s) = links.remove(&close.conn) { broker.disconnect(s); }
                }
                Output::Transmit(conn) => broker.handle_input(links[&conn], now, &mut buf), // "the network"
                Output::TransmitBytes(conn, bytes) =>     // a large record blob, shared: write it next
                    broker.handle_input(links[&conn], now, &mut BytesMut::from(&bytes[..])),
                Output::Event(Event::Admin { id, result: Ok(outcome) }) => {
                    assert_eq!(Some(id), asked.map(|a| a.id()));
                    let c = outcome.take(asked.unwrap()).unwrap();
                    assert_eq!(c.broker_count, 1);
                    break 'run;
                }
                Output::Event(_) => {}
                Output::Timeout(at) => break at,
            }
        };
        // The broker's answers are inputs: hand them in, then drain again.
        let mut answered = false;
        while let Some((sim_conn, bytes)) = broker.poll_transmit() {
            answered = true;
            let conn = *links.iter().find(|(_, s)| **s == sim_conn).unwrap().0;
            client.handle_input(conn, now, &mut BytesMut::from(&bytes[..]));
        }
        if !answered {
            // Sleep until the next deadline (virtual time here), then fire timers.
            now = wake_at.unwrap_or(now + Duration::from_millis(10)).max(now);
            client.handle_timeout(now);
        }
    }
    assert!(asked.is_some());
}
