//! `perf scale`: the scale matrix. For each partition count, a fresh topic is filled by keyed
//! `perf produce` (records spread over every partition) beside `perf produce --raw --keys`
//! (the same keyed records as prebuilt requests), then read by `perf consume` beside
//! `perf consume --raw`; every run is a child process of this binary,
//! so each one's CPU time and peak memory are its own. One row per case: records/s, the raw
//! ceiling of the same round, their ratio, CPU per record of both and the client's peak RSS.

use crate::{CliError, CliResult, Global, fail};
use clap::Args;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `stellflow perf scale`
#[derive(Args, Debug)]
pub struct PerfScale {
    /// Partition counts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 256, 1024, 4096])]
    partitions: Vec<i32>,
    /// Records each run produces and consumes.
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Distinct keys of the keyed records (spread by key hash over the partitions).
    #[arg(long, default_value_t = 100_000)]
    keys: u32,
    /// Topic names start with this; each run adds its partition count and a run id.
    #[arg(long, default_value = "scale")]
    topic_prefix: String,
    /// The name of the broker in the rows (`real`, `sim`, …); default `sim` on the embedded
    /// broker, else `broker`.
    #[arg(long)]
    label: Option<String>,
    /// Also append the rows to this CSV file (with a header line when it is new), the input of
    /// `scripts/scale-plot.sh`.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// What one child run printed: records/s and CPU ns per record, and its peak RSS in MiB.
#[derive(Debug, Clone, Copy)]
struct Figures {
    rate: f64,
    cpu_ns: f64,
    rss_mib: f64,
}

/// One row of the matrix.
struct Row {
    partitions: i32,
    case: &'static str,
    client: Figures,
    raw: Figures,
}

/// Runs the matrix.
pub fn run(g: &Global, a: &PerfScale) -> CliResult {
    if a.records == 0 || a.record_size == 0 || a.keys == 0 {
        return fail("--records, --record-size and --keys must be positive");
    }
    // Without a bootstrap, a sim broker in this process serves the children.
    let (server, bootstrap) = match &g.bootstrap {
        Some(b) => (None, b.clone()),
        None => {
            let s =
                stellflow_sim::serve_with("127.0.0.1:0", stellflow_sim::ServerConfig::default())
                    .map_err(|e| CliError(format!("cannot start the sim broker: {e}")))?;
            let addr = s.local_addr().to_string();
            (Some(s), addr)
        }
    };
    let label = (a.label.clone())
        .unwrap_or_else(|| if server.is_some() { "sim" } else { "broker" }.to_owned());
    let runner = Runner::new(g, bootstrap)?;
    let run_id = std::process::id();
    println!(
        "scale matrix on {label} ({}): {} records of {} B a run, {} keys",
        runner.bootstrap, a.records, a.record_size, a.keys
    );
    println!("{}", Row::header());
    let mut rows = Vec::new();
    let (n, size, keys) = (
        a.records.to_string(),
        a.record_size.to_string(),
        a.keys.to_string(),
    );
    let common = ["--num-records", &n, "--record-size", &size, "--acks", "1"];
    for &p in &a.partitions {
        // One topic at a time, deleted after its runs: a broker holds a few files per
        // partition, and thousands of partitions twice over can pass its open-file limit.
        let topic = format!("{}-{p}-{run_id}", a.topic_prefix);
        let raw_topic = format!("{topic}-raw");
        let produce = [
            &["perf", "produce", "--topic", &topic, "--keys", &keys][..],
            &common,
        ]
        .concat();
        // The raw ceiling of the same keyed records: spread as their keys hash, in the
        // fullest batches a producer could build.
        let raw_produce = [
            &[
                "perf", "produce", "--raw", "--topic", &raw_topic, "--keys", &keys,
            ][..],
            &common,
        ]
        .concat();
        // 1. Keyed produce, then consume and raw consume of what it wrote.
        runner.quiet(&["topics", "create", &topic, "-p", &p.to_string()])?;
        let keyed = runner.measure(&produce)?;
        let consume = Row {
            partitions: p,
            case: "consume",
            client: runner.measure(&["perf", "consume", "--topic", &topic, "--messages", &n])?,
            raw: runner.measure(&[
                "perf",
                "consume",
                "--raw",
                "--topic",
                &topic,
                "--messages",
                &n,
            ])?,
        };
        println!("{}", consume.line());
        runner.tidy(&["topics", "delete", &topic]);
        // 2. The produce ceiling on a topic of as many partitions.
        runner.quiet(&["topics", "create", &raw_topic, "-p", &p.to_string()])?;
        let produce = Row {
            partitions: p,
            case: "keyed produce",
            client: keyed,
            raw: runner.measure(&raw_produce)?,
        };
        println!("{}", produce.line());
        runner.tidy(&["topics", "delete", &raw_topic]);
        rows.extend([produce, consume]);
    }
    if let Some(path) = &a.csv {
        write_csv(path, &label, &rows)?;
    }
    drop(server);
    Ok(())
}

impl Row {
    fn header() -> String {
        format!(
            "{:>10}  {:<13}  {:>12}  {:>12}  {:>6}  {:>10}  {:>10}  {:>8}",
            "partitions",
            "case",
            "records/s",
            "raw",
            "ratio",
            "ns CPU/rec",
            "raw ns/rec",
            "RSS MiB"
        )
    }

    fn line(&self) -> String {
        format!(
            "{:>10}  {:<13}  {:>12.0}  {:>12.0}  {:>6.2}  {:>10.0}  {:>10.0}  {:>8.1}",
            self.partitions,
            self.case,
            self.client.rate,
            self.raw.rate,
            self.client.rate / self.raw.rate.max(1e-9),
            self.client.cpu_ns,
            self.raw.cpu_ns,
            self.client.rss_mib
        )
    }
}

/// Appends the rows to `path`, with the header line first when the file is new.
fn write_csv(path: &std::path::Path, label: &str, rows: &[Row]) -> CliResult {
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| CliError(format!("cannot open {}: {e}", path.display())))?;
    let mut text = String::new();
    if new {
        text.push_str("broker,partitions,case,records_per_s,raw_records_per_s,ns_cpu_per_record,raw_ns_cpu_per_record,rss_mib\n");
    }
    for r in rows {
        text.push_str(&format!(
            "{label},{},{},{:.0},{:.0},{:.0},{:.0},{:.1}\n",
            r.partitions,
            r.case,
            r.client.rate,
            r.raw.rate,
            r.client.cpu_ns,
            r.raw.cpu_ns,
            r.client.rss_mib
        ));
    }
    f.write_all(text.as_bytes())
        .map_err(|e| CliError(format!("cannot write {}: {e}", path.display())))
}

/// Runs this binary's commands as child processes against one broker.
struct Runner {
    exe: std::path::PathBuf,
    bootstrap: String,
    timeout: String,
}

impl Runner {
    fn new(g: &Global, bootstrap: String) -> CliResult<Runner> {
        let exe = std::env::current_exe()
            .map_err(|e| CliError(format!("cannot find this program to run its cases: {e}")))?;
        // Creating thousands of partitions takes the real broker tens of seconds.
        let timeout = g.timeout.unwrap_or(120.0).to_string();
        Ok(Runner {
            exe,
            bootstrap,
            timeout,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(["-b", &self.bootstrap, "--timeout", &self.timeout]);
        c.args(args);
        c
    }

    /// Runs `args`, failing with its error output if it fails.
    fn quiet(&self, args: &[&str]) -> CliResult {
        let out = self.command(args).output()?;
        if !out.status.success() {
            return fail(format!(
                "`stellflow {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Runs `args`, a clean-up: a failure is a warning (the rows measured stand).
    fn tidy(&self, args: &[&str]) {
        if let Err(e) = self.quiet(args) {
            eprintln!("warning: {}", e.0);
        }
    }

    /// Runs one `perf` case and reads its result line (`… records/sec …, N ns CPU/record …`)
    /// and its peak RSS, sampled while it runs.
    fn measure(&self, args: &[&str]) -> CliResult<Figures> {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let stdout = child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            if let Some(out) = stdout {
                lines.extend(BufReader::new(out).lines().map_while(Result::ok));
            }
            lines
        });
        let mut peak_kib = 0u64;
        let status = loop {
            if let Some(kib) = peak_rss_kib(pid) {
                peak_kib = peak_kib.max(kib);
            }
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let lines = reader.join().unwrap_or_default();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        if !status.success() {
            return fail(format!(
                "`stellflow {}` failed: {}",
                args.join(" "),
                last_line(&err)
            ));
        }
        let line = lines
            .iter()
            .find(|l| {
                l.contains("records/sec") && (l.contains(" sent,") || l.contains(" consumed,"))
            })
            .ok_or_else(|| {
                CliError(format!(
                    "`stellflow {}` printed no result line",
                    args.join(" ")
                ))
            })?;
        Ok(Figures {
            rate: number_before(line, " records/sec").unwrap_or(0.0),
            cpu_ns: number_before(line, " ns CPU/record").unwrap_or(f64::NAN),
            rss_mib: peak_kib as f64 / 1024.0,
        })
    }
}

/// The last non-empty line of a command's error output.
fn last_line(err: &str) -> &str {
    err.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no error output")
}

/// The number written right before `marker` in `line` (`2000000 records consumed, 200.00 MB,
/// 3093074.8 records/sec` → 3093074.8 for ` records/sec`).
fn number_before(line: &str, marker: &str) -> Option<f64> {
    let end = line.find(marker)?;
    let head = line.get(..end)?;
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + 1);
    head.get(start..)?.parse().ok()
}

/// The peak resident set of process `pid` so far (`VmHWM`, Linux), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::number_before;

    #[test]
    fn reads_the_figures_of_a_result_line() {
        let consume = "2000000 records consumed, 200.00 MB, 3093074.8 records/sec (309.31 MB/sec), \
                       107 ns CPU/record (0.213 s CPU, user + system); first record after 75.4 ms";
        assert_eq!(number_before(consume, " records/sec"), Some(3_093_074.8));
        assert_eq!(number_before(consume, " ns CPU/record"), Some(107.0));
        let produce =
            "2000000 records sent, 271146.6 records/sec (27.11 MB/sec), 201 ns CPU/record";
        assert_eq!(number_before(produce, " records/sec"), Some(271_146.6));
        assert_eq!(number_before("no figures", " records/sec"), None);
    }
}
