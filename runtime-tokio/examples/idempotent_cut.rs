//! An idempotent producer across a cut connection (ARCHITECTURE decision 4).
//!
//! Runs a TCP proxy in front of a broker, sends records through it with idempotence on, and
//! cuts the connection right after a Produce request: either forwarded first (the broker
//! writes it, its answer is lost) or dropped (it never arrives). The producer reconnects and
//! re-sends what was in flight once the broker answers on the fresh connection. For each cut
//! it prints how long after that first answer the last pending send completed; at the end it
//! reads the topic back and counts the copies of every record.
//!
//! The broker must advertise the proxy's address, so that the client's every connection goes
//! through the proxy (the real broker: `advertisedPort` and `advertisedEndpoint` set to the
//! proxy's port through `STELLFLOW_OPTS`):
//!
//! ```sh
//! cargo run -p stellflow-tokio --example idempotent_cut -- BROKER_ADDR PROXY_ADDR TOPIC [CUTS]
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stellflow_tokio::{Client, ClientConfig, OffsetReset, Record, TopicPartition};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy was asked to do and what it saw.
#[derive(Default)]
struct Proxy {
    /// Cut the connection at the next Produce: `Some(true)` after forwarding it,
    /// `Some(false)` instead of forwarding it.
    armed: Option<bool>,
    /// Connections accepted so far.
    accepted: u64,
    /// The connections opened before the last cut (their ids are below this).
    cut_before: u64,
    /// When a connection opened after the cut first carried bytes from the broker.
    fresh_answer: Option<Instant>,
}

type Shared = Arc<Mutex<Proxy>>;

async fn client_to_broker(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    proxy: Shared,
) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 4];
        from.read_exact(&mut len).await?;
        let n = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
        if n > 64 << 20 {
            return Ok(());
        }
        let mut payload = vec![0u8; n];
        from.read_exact(&mut payload).await?;
        let produce = payload.get(..2) == Some(&[0, 2][..]); // apiKey 2: Produce
        let cut = if produce {
            proxy.lock().map_or(None, |mut p| p.armed.take())
        } else {
            None
        };
        if cut != Some(false) {
            to.write_all(&len).await?;
            to.write_all(&payload).await?;
        }
        if cut.is_some() {
            if let Ok(mut p) = proxy.lock() {
                p.cut_before = p.accepted;
                p.fresh_answer = None;
            }
            return Ok(()); // both sockets close: the connection is cut
        }
    }
}

async fn broker_to_client(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    proxy: Shared,
    id: u64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        if let Ok(mut p) = proxy.lock()
            && id >= p.cut_before
            && p.cut_before > 0
            && p.fresh_answer.is_none()
        {
            p.fresh_answer = Some(Instant::now());
        }
        to.write_all(buf.get(..n).unwrap_or_default()).await?;
    }
}

async fn serve(listener: TcpListener, broker: String, proxy: Shared) {
    while let Ok((client, _)) = listener.accept().await {
        let Ok(upstream) = TcpStream::connect(&broker).await else {
            continue;
        };
        let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
        let id = proxy.lock().map_or(0, |mut p| {
            p.accepted += 1;
            p.accepted
        });
        let (cr, cw) = client.into_split();
        let (ur, uw) = upstream.into_split();
        let p = Arc::clone(&proxy);
        tokio::spawn(async move {
            tokio::select! {
                _ = client_to_broker(cr, uw, Arc::clone(&p)) => {}
                _ = broker_to_client(ur, cw, p, id) => {}
            }
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (broker, listen, topic, cuts) = match args.as_slice() {
        [b, l, t] => (b.clone(), l.clone(), t.clone(), 10usize),
        [b, l, t, n] => (b.clone(), l.clone(), t.clone(), n.parse()?),
        _ => return Err("usage: idempotent_cut BROKER_ADDR PROXY_ADDR TOPIC [CUTS]".into()),
    };
    let proxy = Shared::default();
    let listener = TcpListener::bind(&listen).await?;
    tokio::spawn(serve(listener, broker, Arc::clone(&proxy)));

    let mut config = ClientConfig::new(&listen)?;
    config.producer.idempotence = true;
    config.producer.create_missing_topics = Some(1);
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let client = Client::connect(config).await?;
    let producer = client.producer();
    producer
        .send(Record::new(topic.as_str(), "warm-up"))
        .await?;

    let per_cut: usize = 20;
    let mut worst = Duration::ZERO;
    for cut in 0..cuts {
        let forwarded = cut % 2 == 0;
        proxy.lock().map_err(|_| "poisoned")?.armed = Some(forwarded);
        let started = Instant::now();
        let mut sends = tokio::task::JoinSet::new();
        for i in 0..per_cut {
            let value = format!("cut{cut}-{i}");
            let delivery = producer.enqueue(Record::new(topic.as_str(), value)).await?;
            sends.spawn(async move { (delivery.await, Instant::now()) });
        }
        let mut last = started;
        while let Some(done) = sends.join_next().await {
            let (result, at) = done?;
            result?;
            last = last.max(at);
        }
        let fresh = proxy.lock().map_err(|_| "poisoned")?.fresh_answer;
        let Some(fresh) = fresh else {
            return Err(format!("cut {cut}: the proxy saw no answer on a fresh connection").into());
        };
        let after = last.saturating_duration_since(fresh);
        worst = worst.max(after);
        println!(
            "cut {cut} ({}): {per_cut} sends done {:.0} ms after the fresh connection's first \
             answer, {:.0} ms after they started",
            if forwarded {
                "Produce forwarded, answer lost"
            } else {
                "Produce dropped"
            },
            after.as_secs_f64() * 1e3,
            last.duration_since(started).as_secs_f64() * 1e3,
        );
    }

    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new(topic.as_str(), 0)])?;
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    let expected = 1 + per_cut * cuts;
    let mut read = 0;
    // Everything is read once `expected` records arrived; a second more shows any duplicate.
    let mut idle_until = None;
    loop {
        let wait = idle_until.map_or(Duration::from_secs(10), |t: Instant| {
            t.saturating_duration_since(Instant::now())
        });
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(record) => {
                let record = record?;
                let value = String::from_utf8_lossy(record.value.as_deref().unwrap_or_default());
                *copies.entry(value.into_owned()).or_default() += 1;
                read += 1;
                if read >= expected && idle_until.is_none() {
                    idle_until = Some(Instant::now() + Duration::from_secs(1));
                }
            }
            Err(_) => break,
        }
    }
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    let missing = expected.saturating_sub(copies.len());
    println!(
        "log: {read} records, {} distinct of {expected} sent, {} duplicated, {missing} missing; \
         worst completion {:.0} ms after the fresh connection's first answer",
        copies.len(),
        twice.len(),
        worst.as_secs_f64() * 1e3
    );
    client.close().await?;
    if !twice.is_empty() || missing > 0 || worst > Duration::from_secs(1) {
        return Err(format!("duplicated {twice:?}, {missing} missing, worst {worst:?}").into());
    }
    Ok(())
}
