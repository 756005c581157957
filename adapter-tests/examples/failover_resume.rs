//! Measures how soon a producer and a group consumer resume after a real broker restarts on its
//! data: the time from `Admin::reassert_leadership` to the producer's next
//! acknowledgement and to the consumer's next record.
//!
//! The scenario, per run: a producer sends one record every 20 ms (`enqueue`, deliveries waited
//! on in order by a second thread), a consumer in a group polls on the blocking adapter, the
//! broker is stopped (SIGTERM, or SIGKILL with `--kill`) and started again on the same data
//! directory; it then reports every partition leaderless for `--leaderless-ms` (7 s), until an
//! admin client re-asserts leadership. The delays are printed per run, then a summary.
//!
//! ```sh
//! cargo run --release -p stellflow-adapter-tests --example failover_resume -- \
//!     --broker-script ../shared/real-broker/run-broker.sh --port 19400 \
//!     --data-dir /some/scratch/dir --runs 5 [--kill] [--verbose]
//! ```
//!
//! The data directory is created if missing and left in place (delete it afterwards). The
//! broker is started by this tool and stopped with SIGTERM when it ends.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use stellflow_blocking::{Client, ClientConfig, OffsetReset, Record, Target};

/// Command-line settings.
struct Args {
    script: String,
    port: u16,
    data_dir: String,
    runs: usize,
    kill: bool,
    leaderless: Duration,
    verbose: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: failover_resume --broker-script PATH --port PORT --data-dir DIR \
         [--runs N] [--kill] [--leaderless-ms MS] [--verbose]"
    );
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut a = Args {
        script: "../shared/real-broker/run-broker.sh".into(),
        port: 0,
        data_dir: String::new(),
        runs: 5,
        kill: false,
        leaderless: Duration::from_secs(7),
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--broker-script" => a.script = value(),
            "--port" => a.port = value().parse().unwrap_or_else(|_| usage()),
            "--data-dir" => a.data_dir = value(),
            "--runs" => a.runs = value().parse().unwrap_or_else(|_| usage()),
            "--leaderless-ms" => {
                a.leaderless = Duration::from_millis(value().parse().unwrap_or_else(|_| usage()))
            }
            "--kill" => a.kill = true,
            "--verbose" => a.verbose = true,
            _ => usage(),
        }
    }
    if a.port == 0 || a.data_dir.is_empty() {
        usage();
    }
    a
}

/// The broker process this tool runs.
struct Broker {
    child: Option<Child>,
    script: String,
    port: u16,
    data_dir: String,
}

impl Broker {
    fn start(&mut self) {
        let child = Command::new(&self.script)
            .arg(self.port.to_string())
            .arg(&self.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.script));
        self.child = Some(child);
        // Wait until it accepts connections.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the broker did not start within 30 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the broker with `signal` and waits for it to exit.
    fn stop(&mut self, signal: &str) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop("TERM");
    }
}

/// What the producer and consumer threads saw, as instants.
#[derive(Default)]
struct Seen {
    acks: Vec<Instant>,
    records: Vec<Instant>,
    failed: u64,
}

/// One run's delays: to the producer's next acknowledgement and the consumer's next record.
type Delays = (Option<Duration>, Option<Duration>);

/// The load average, for the report (Linux only; empty elsewhere).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn first_after(times: &[Instant], t: Instant) -> Option<Duration> {
    times.iter().find(|&&x| x >= t).map(|&x| x - t)
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("none within 15 s".into(), |d| {
        format!("{} ms", d.as_millis())
    })
}

fn main() {
    let args = parse_args();
    if args.verbose {
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
            .with_writer(std::io::stderr)
            .init();
    }
    std::fs::create_dir_all(&args.data_dir).expect("cannot create the data directory");
    let mut broker = Broker {
        child: None,
        script: args.script.clone(),
        port: args.port,
        data_dir: args.data_dir.clone(),
    };
    broker.start();
    let bootstrap = format!("127.0.0.1:{}", args.port);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let topic = format!("resume-{stamp}");

    let admin = Client::connect(ClientConfig::new(&bootstrap).expect("bootstrap")).expect("admin");
    admin
        .admin()
        .create_topic(&topic, 1, Target::Any)
        .expect("create topic");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));

    // The producer: one record every 20 ms; a second thread waits on the deliveries in order.
    let mut pconfig = ClientConfig::new(&bootstrap).expect("bootstrap");
    pconfig.header.client_id = Some(format!("resume-producer-{stamp}"));
    let producer = Client::connect(pconfig).expect("producer").producer();
    let (tx, rx) = mpsc::channel();
    let producing = {
        let (stop, sent, topic) = (stop.clone(), sent.clone(), topic.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let n = sent.fetch_add(1, Ordering::Relaxed);
                match producer.enqueue(Record::new(topic.as_str(), n.to_string())) {
                    Ok(d) => drop(tx.send(d)),
                    Err(e) => eprintln!("enqueue failed: {e}"),
                }
                thread::sleep(Duration::from_millis(20));
            }
            drop(tx);
            let _ = producer.close();
        })
    };
    let acking = {
        let seen = seen.clone();
        thread::spawn(move || {
            for d in rx {
                let outcome = d.wait();
                let mut s = seen.lock().expect("lock");
                match outcome {
                    Ok(_) => s.acks.push(Instant::now()),
                    Err(e) => {
                        s.failed += 1;
                        eprintln!("delivery failed: {e}");
                    }
                }
            }
        })
    };

    // The consumer: a group member on the blocking adapter, polling.
    let mut cconfig = ClientConfig::new(&bootstrap).expect("bootstrap");
    cconfig.consumer.group_id = Some(format!("resume-group-{stamp}"));
    cconfig.consumer.auto_offset_reset = OffsetReset::Earliest;
    let consumer = Client::connect(cconfig).expect("consumer").consumer();
    consumer.subscribe(&[&topic]).expect("subscribe");
    let consuming = {
        let (seen, stop) = (seen.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match consumer.poll(Duration::from_millis(100)) {
                    Ok(records) if !records.is_empty() => {
                        let now = Instant::now();
                        seen.lock().expect("lock").records.push(now);
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("poll failed: {e}"),
                }
            }
            let _ = consumer.close();
        })
    };

    let signal = if args.kill { "KILL" } else { "TERM" };
    let mut results: Vec<Delays> = Vec::new();
    for run in 1..=args.runs {
        // Steady state: both sides made progress in the last second.
        let steady_by = Instant::now() + Duration::from_secs(30);
        loop {
            thread::sleep(Duration::from_millis(200));
            let now = Instant::now();
            let s = seen.lock().expect("lock");
            let fresh = |v: &[Instant]| v.last().is_some_and(|&t| now - t < Duration::from_secs(1));
            if fresh(&s.acks) && fresh(&s.records) {
                break;
            }
            assert!(now < steady_by, "run {run}: no steady state within 30 s");
        }
        thread::sleep(Duration::from_secs(2));
        broker.stop(signal);
        broker.start();
        let restarted = Instant::now();
        thread::sleep(args.leaderless.saturating_sub(restarted.elapsed()));
        let asked = Instant::now();
        let reasserted = admin.admin().reassert_leadership(1).expect("reassert");
        let done = Instant::now();
        assert!(!reasserted.is_empty(), "nothing to re-assert");
        let (p, c) = loop {
            thread::sleep(Duration::from_millis(50));
            let s = seen.lock().expect("lock");
            let (p, c) = (first_after(&s.acks, done), first_after(&s.records, done));
            if (p.is_some() && c.is_some()) || done.elapsed() > Duration::from_secs(15) {
                break (p, c);
            }
        };
        let s = seen.lock().expect("lock");
        println!(
            "run {run} ({signal}): reassert took {} ms; producer resumed {}, consumer resumed {} \
             after it; failed deliveries so far {}; load average {}",
            (done - asked).as_millis(),
            ms(p),
            ms(c),
            s.failed,
            load_average()
        );
        results.push((p, c));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = consuming.join();
    let _ = producing.join();
    let _ = acking.join();
    let worst = |f: fn(&Delays) -> Option<Duration>| {
        results
            .iter()
            .map(f)
            .try_fold(Duration::ZERO, |m, d| d.map(|d| m.max(d)))
    };
    println!(
        "RESULT failover_resume_{} runs {} worst_producer {} worst_consumer {}",
        signal.to_lowercase(),
        results.len(),
        ms(worst(|r| r.0)),
        ms(worst(|r| r.1)),
    );
    drop(admin);
    drop(broker);
}
