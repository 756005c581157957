//! `stellflow`: the command-line tool of stellflow-rs, on the blocking adapter.
//!
//! Without `--bootstrap` every command runs against an embedded simulated broker on a loopback
//! port (started for the command and gone after it), so `stellflow demo` works on a fresh
//! machine. Errors are one line on stderr and a non-zero exit code.

mod admin;
mod cpu;
mod data;
mod perf;
mod perf_raw;
mod progress;
mod settings;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use stellflow_blocking::{Acks, BatchFormat, Client, ClientConfig, Compression, Options};

const EXAMPLES: &str = "Examples:
  stellflow demo                                   produce and consume on an embedded broker
  stellflow broker --port 9092                     run a sim broker until Ctrl-C
  stellflow -b 127.0.0.1:9092 topics create orders -p 6
  seq 100000 | stellflow -b 127.0.0.1:9092 produce orders --acks 1
  stellflow -b 127.0.0.1:9092 consume orders --count 100000 > out.txt
  stellflow -b 127.0.0.1:9092 offsets orders --group billing
  stellflow perf produce --num-records 500000 --record-size 1024 --acks 1";

/// Command-line tool for the Stellflow message broker.
#[derive(Parser, Debug)]
#[command(name = "stellflow", version, about, propagate_version = true, after_help = EXAMPLES)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options of every command.
#[derive(Args, Debug, Clone)]
struct Global {
    /// Broker(s) to bootstrap from, `host:port[,host:port]`. Without it, an embedded sim broker
    /// is started for the command.
    #[arg(long, short = 'b', global = true, env = "STELLFLOW_BOOTSTRAP")]
    bootstrap: Option<String>,
    /// Timeout in seconds (default 10): of each request, of waiting for a broker to answer at
    /// all (then the cluster counts as unreachable and `consume` fails naming the brokers),
    /// and of each record's delivery, in-flight requests included (a produce whose records
    /// cannot be delivered ends within it, and counts them). Given explicitly, it also bounds
    /// a whole `produce` run, however healthy: it stops reading its input and ends within
    /// the timeout plus a second, counting what was not produced.
    #[arg(long, global = true)]
    timeout: Option<f64>,
    /// Log what the client does on stderr: -v reconnects, leader moves and warnings, -vv
    /// every connection, metadata round and retry (debug), -vvv everything.
    #[arg(long = "verbose", short = 'v', global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// clientId sent in request headers.
    #[arg(long, global = true)]
    client_id: Option<String>,
    /// A Kafka-style client setting, like kcat's `-X`: `-X linger.ms=20 -X acks=1`
    /// (repeatable; the user guide's Kafka table lists the keys). Overrides the command's own
    /// options.
    #[arg(short = 'X', global = true, value_name = "KEY=VALUE")]
    property: Vec<String>,
    /// Kafka-style client settings from a Java `.properties` file (`key=value` lines, `#`
    /// comments), like kcat's `-F`. Applied before `-X` (which overrides it); like `-X` it
    /// overrides the command's own options, except that `--bootstrap` overrides the file's
    /// `bootstrap.servers`. The file's (or `-X`'s) `bootstrap.servers` stands for
    /// `--bootstrap` when that is not given.
    #[arg(long = "config", short = 'F', global = true, value_name = "FILE")]
    config_file: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The API versions a broker supports and the versions this client chose.
    ApiVersions {
        /// Ask this broker id (default: any).
        #[arg(long)]
        broker: Option<i32>,
    },
    /// Brokers in the merged metadata, leaderless partitions, and the counts a broker reports.
    Cluster,
    /// List, describe, create and delete topics.
    #[command(subcommand)]
    Topics(admin::TopicsCmd),
    /// Produce lines from stdin or a file, one record per line.
    Produce(data::ProduceArgs),
    /// Consume records and print them.
    Consume(data::ConsumeArgs),
    /// Log start/end offsets of a topic's partitions, and a group's committed offsets.
    Offsets(data::OffsetsArgs),
    /// Throughput and latency tests (kafka perf-test style).
    #[command(subcommand)]
    Perf(perf::PerfCmd),
    /// Run the simulated broker on a loopback port until Ctrl-C (SIGINT or SIGTERM: it shuts
    /// down and exits 0).
    Broker {
        /// Port of the first broker (0: any free port).
        #[arg(long, default_value_t = 9092)]
        port: u16,
        /// Number of brokers (the others take free ports).
        #[arg(long, default_value_t = 1)]
        brokers: usize,
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
    },
    /// Produce → consume end to end on an embedded broker, narrating every step.
    Demo {
        /// Records to produce and consume back.
        #[arg(long, default_value_t = 1000)]
        records: usize,
    },
}

/// A one-line error for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

/// Results of the commands.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Fails with a message.
pub fn fail<T>(msg: impl Into<String>) -> CliResult<T> {
    Err(CliError(msg.into()))
}

/// A running command's connection: the client, and the embedded broker when there is one.
pub struct Env {
    /// The client.
    pub client: Client,
    /// The embedded broker, if no `--bootstrap` was given.
    pub embedded: Option<stellflow_sim::SimServer>,
    /// How long to wait for answers.
    pub timeout: Duration,
    /// When the whole command must be over: `--timeout` after it started, when given.
    pub deadline: Option<Instant>,
}

/// `--timeout` when it is not given, in seconds.
const DEFAULT_TIMEOUT_SECS: f64 = 10.0;

/// Producer settings shared by `produce`, `perf produce` and `demo`.
#[derive(Args, Debug, Clone)]
pub struct ProducerOpts {
    /// Acknowledgements: 0, 1 or all (-1).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    acks: Acks,
    /// Batch format: v1 (readable by the Java/Go SDKs), native, or native-gzip.
    #[arg(long, default_value = "v1", value_parser = parse_format)]
    format: BatchFormat,
    /// Linger in milliseconds.
    #[arg(long)]
    linger_ms: Option<u64>,
    /// Largest batch per partition, in bytes.
    #[arg(long)]
    batch_size: Option<usize>,
    /// Idempotent producer (implies the native format).
    #[arg(long)]
    idempotence: bool,
    /// Largest Produce request in bytes (`producer.max_request_size`, default 16 MiB): a
    /// record larger than it, less a few hundred bytes of headers, is refused.
    #[arg(long)]
    max_request_size: Option<usize>,
}

impl ProducerOpts {
    fn apply(&self, c: &mut ClientConfig) {
        c.producer.acks = self.acks;
        c.producer.format = self.format;
        c.producer.idempotence = self.idempotence;
        if let Some(ms) = self.linger_ms {
            c.producer.linger = Duration::from_millis(ms);
        }
        if let Some(b) = self.batch_size {
            c.producer.batch_size = b;
        }
        if let Some(m) = self.max_request_size {
            c.producer.max_request_size = m;
            // Room for one such record in the buffer too.
            c.producer.buffer_memory = c.producer.buffer_memory.max(m);
        }
    }
}

fn parse_acks(s: &str) -> Result<Acks, String> {
    match s {
        "0" => Ok(Acks::None),
        "1" => Ok(Acks::Leader),
        "all" | "-1" => Ok(Acks::All),
        _ => Err("expected 0, 1 or all".into()),
    }
}

fn parse_format(s: &str) -> Result<BatchFormat, String> {
    match s {
        "v1" => Ok(BatchFormat::V1),
        "native" => Ok(BatchFormat::Native(Compression::None)),
        "native-gzip" | "gzip" => Ok(BatchFormat::Native(Compression::Gzip)),
        _ => Err("expected v1, native or native-gzip".into()),
    }
}

impl Global {
    /// Starts the embedded broker when needed, and a client configured by `tune`.
    fn connect(&self, tune: impl FnOnce(&mut ClientConfig)) -> CliResult<Env> {
        let started = Instant::now();
        let secs = self.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
            return fail("--timeout must be a positive number of seconds");
        }
        let timeout = Duration::from_secs_f64(secs);
        let properties = self.properties()?;
        let (bootstrap, embedded) = match properties.bootstrap(self.bootstrap.as_deref()) {
            Some(b) => (b.to_owned(), None),
            None => {
                // The server's defaults, except a retention of 64 segments (2 GiB) per
                // partition instead of 8, so that perf runs read back what they wrote.
                let log = stellflow_sim::LogConfig {
                    retention_segments: 64,
                    ..stellflow_sim::LogConfig::default()
                };
                let config = stellflow_sim::ServerConfig {
                    cluster: stellflow_sim::ClusterConfig::default().log_config(log),
                    ..stellflow_sim::ServerConfig::default()
                };
                let server = stellflow_sim::serve_with("127.0.0.1:0", config)
                    .map_err(|e| CliError(format!("cannot start the embedded broker: {e}")))?;
                let addr = server.local_addr().to_string();
                eprintln!("(no --bootstrap: using an embedded sim broker at {addr})");
                (addr, Some(server))
            }
        };
        let mut config = ClientConfig::new(&bootstrap)?;
        config.request_timeout = timeout;
        // --timeout bounds delivery too (the library's default waits 120 s).
        config.producer.delivery_timeout = timeout;
        // ... and how long no broker may answer before the cluster counts as unreachable.
        config.unreachable_timeout = timeout;
        config.producer.max_block = timeout.max(Duration::from_secs(30));
        config.header.client_id.clone_from(&self.client_id);
        tune(&mut config);
        properties.apply(&mut config)?;
        let mut options = Options::default();
        options.close_timeout = timeout;
        let client = Client::connect_with(config, options)?;
        let env = Env {
            client,
            embedded,
            timeout,
            deadline: self.timeout.map(|_| started + timeout),
        };
        env.wait_ready(&bootstrap)?;
        Ok(env)
    }
}

impl Env {
    /// Waits until a broker answered metadata; a clear error when none can be reached.
    fn wait_ready(&self, bootstrap: &str) -> CliResult {
        let start = Instant::now();
        loop {
            if !self.client.metadata().brokers.is_empty() {
                return Ok(());
            }
            let waited = start.elapsed();
            if let Some(e) = self.client.connect_error()
                && waited > Duration::from_millis(500)
            {
                return fail(format!("broker unreachable: {e}"));
            }
            if waited > self.timeout {
                return fail(format!(
                    "no broker at {bootstrap} answered within {:?}",
                    self.timeout
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Watches `topic` until the returned guard is dropped, and says once on stderr (one line
    /// per partition and reason) when a partition it waits on has no leader, and why — at
    /// once, not when the timeout ends the command.
    pub fn watch_leaders(&self, topic: &str) -> LeaderWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let (client, topic, flag) = (self.client.clone(), topic.to_owned(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("leader-watch".into())
            .spawn(move || {
                let mut told = std::collections::HashSet::new();
                while !flag.load(Ordering::Relaxed) {
                    let meta = client.metadata();
                    if let Some(t) = meta.topics.get(&topic) {
                        for p in t.partitions.values() {
                            if let Err(reason) = p.leader()
                                && told.insert((p.partition, reason.to_string()))
                            {
                                eprintln!(
                                    "(waiting: {topic}-{} has no leader: {reason}; retrying until --timeout)",
                                    p.partition
                                );
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
            .ok();
        LeaderWatch { stop, thread }
    }

    /// Whether the broker was started for this command (its topics can be created at will).
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// The partition count of `topic`, or a clear error when no broker knows it. On the
    /// embedded broker a missing topic is created with `create_partitions` partitions.
    pub fn topic_partitions(&self, topic: &str, create_partitions: i32) -> CliResult<i32> {
        match self.known_partitions(topic, create_partitions)? {
            Some(count) => Ok(count),
            None => fail(format!(
                "unknown topic {topic:?}: create it with `stellflow topics create {topic}`"
            )),
        }
    }

    /// The partition count of `topic`; `None` when no broker knows it (on the embedded
    /// broker a missing topic is created with `create_partitions` partitions instead).
    pub fn known_partitions(&self, topic: &str, create_partitions: i32) -> CliResult<Option<i32>> {
        let admin = self.client.admin();
        let (topics, _) = admin.describe_topics(&[topic])?;
        if let Some(t) = topics.first() {
            return Ok(Some(i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)));
        }
        if !self.is_embedded() {
            return Ok(None);
        }
        let r = admin.create_topic(topic, create_partitions, stellflow_blocking::Target::Any)?;
        if !r.is_ok() {
            return fail(format!("cannot create topic {topic:?}: {:?}", r.partitions));
        }
        eprintln!(
            "(created topic {topic} with {create_partitions} partition(s) on the embedded broker)"
        );
        // Let the metadata see it before producing.
        let _ = admin.describe_topics(&[topic])?;
        Ok(Some(create_partitions))
    }
}

/// Stops a [`Env::watch_leaders`] thread when dropped.
pub struct LeaderWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LeaderWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `-v` → info, `-vv` → debug, `-vvv` → trace, as `tracing` lines on stderr; nothing without.
fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::LevelFilter;
    let level = match verbose {
        0 => return,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_max_level(level)
        .with_target(verbose > 2)
        .init();
}

fn run(cli: Cli) -> CliResult {
    let g = cli.global;
    init_logging(g.verbose);
    match cli.command {
        Command::ApiVersions { broker } => admin::api_versions(&g.connect(|_| {})?, broker),
        Command::Cluster => admin::cluster(&g.connect(|_| {})?),
        Command::Topics(cmd) => admin::topics(&g.connect(|_| {})?, cmd),
        Command::Produce(a) => {
            // A cluster that never answers ends the command before any input is read: say
            // that nothing was produced, so the summary still counts the records.
            let env = g.connect(|c| a.producer.apply(c)).map_err(|e| {
                CliError(format!(
                    "0 record(s) produced to {} (the input was not read): {}",
                    a.topic, e.0
                ))
            })?;
            data::produce(&env, &a)
        }
        Command::Consume(a) => {
            let env = g.connect(|c| a.tune(c))?;
            data::consume(&env, &a)
        }
        Command::Offsets(a) => data::offsets(&g, &a),
        Command::Perf(cmd) => perf::run(&g, cmd),
        Command::Broker {
            port,
            brokers,
            host,
        } => admin::broker(&host, port, brokers),
        Command::Demo { records } => data::demo(&g, records),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("stellflow: {first} (see `stellflow --help`)");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("stellflow: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
