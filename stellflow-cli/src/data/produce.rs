//! `stellflow produce`: lines from stdin or a file become records, with progress and
//! delivery outcomes reaped as they complete.

use crate::progress::Progress;
use crate::{CliError, CliResult, Env, ProducerOpts, fail};
use clap::Args;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Instant;
use stellflow_blocking::{BatchDelivery, Delivery, Error, Record};

/// Records sent with one `enqueue_all` at most; a batch is also sent as soon as the input has
/// no more lines buffered (so lines typed or trickling in go out at once).
const BATCH: usize = 1024;

/// How long past an explicit `--timeout` a produce still waits for outcomes already due.
const GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// `stellflow produce`
#[derive(Args, Debug)]
pub struct ProduceArgs {
    /// Topic to write to.
    pub topic: String,
    /// Read lines from this file instead of stdin.
    #[arg(long, short = 'f')]
    pub file: Option<PathBuf>,
    /// Split each line at the first occurrence of this separator into key and value.
    #[arg(long)]
    pub key_separator: Option<String>,
    /// Write every record to this partition (default: the partitioner chooses).
    #[arg(long)]
    pub partition: Option<i32>,
    /// Partitions of the topic when the embedded broker creates it.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    #[command(flatten)]
    pub producer: ProducerOpts,
}

/// Records that failed, and the first failure's message.
#[derive(Debug, Default)]
pub struct Failed {
    /// How many records failed.
    pub count: u64,
    /// What the first one said.
    pub first: Option<String>,
}

impl Failed {
    /// Counts `n` failed records, of which `e` is the first.
    fn add(&mut self, e: &Error, n: u64) {
        self.count += n;
        if self.first.is_none() {
            // A record refused before it was queued was never on its way.
            let what = match e {
                Error::Produce(_) => "record refused",
                _ => "record not delivered",
            };
            self.first = Some(format!("{what}: {e}"));
        }
    }
}

/// Waits for the outcomes at the front of `queue` that have arrived (all of them with `all`).
pub fn reap(queue: &mut VecDeque<Delivery>, all: bool) -> CliResult<u64> {
    let mut n = 0;
    while let Some(p) = queue.front_mut() {
        let r = if all { None } else { p.try_wait() };
        let r = match r {
            Some(r) => r,
            None if all => match queue.pop_front() {
                Some(p) => p.wait(),
                None => break,
            },
            None => break,
        };
        if !all {
            queue.pop_front();
        }
        r.map_err(|e| CliError(format!("record not delivered: {e}")))?;
        n += 1;
    }
    Ok(n)
}

/// Waits for the outcomes of the batches at the front of `queue` that have arrived (all of
/// them with `all`); counts the failures into `failed` and returns how many were delivered.
fn reap_batches(
    queue: &mut VecDeque<(BatchDelivery, usize)>,
    all: bool,
    failed: &mut Failed,
) -> u64 {
    let mut n = 0;
    while let Some((mut p, len)) = queue.pop_front() {
        let outcome = match p.try_wait() {
            Some(outcome) => outcome,
            None if all => p.wait(),
            None => {
                queue.push_front((p, len));
                break;
            }
        };
        // Counts and the first error only: no record's metadata is built.
        n += outcome.delivered() as u64;
        if let Some((_, e)) = outcome.first_error() {
            failed.add(e, outcome.failed() as u64);
        }
    }
    n
}

/// What the input thread hands over: a run of lines, or why reading stopped.
enum Input {
    Lines(Vec<String>),
    Failed(String),
}

/// Reads lines on a thread of its own, so that a deadline can end the command while a read
/// blocks (a terminal, a pipe that trickles). Lines come in runs of up to [`BATCH`]: a run
/// ends when the input has nothing more buffered, so lines typed or trickling in go out at
/// once and a file goes in full batches. The channel closes at the end of the input.
fn spawn_reader(input: Box<dyn Read + Send>) -> CliResult<std::sync::mpsc::Receiver<Input>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(4);
    std::thread::Builder::new()
        .name("produce-input".into())
        .spawn(move || {
            let mut input = BufReader::with_capacity(64 * 1024, input);
            let mut run = Vec::with_capacity(BATCH);
            loop {
                let mut line = String::new();
                match input.read_line(&mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        if line.ends_with('\n') {
                            line.pop();
                            if line.ends_with('\r') {
                                line.pop();
                            }
                        }
                        run.push(line);
                    }
                    Err(e) => {
                        let _ = tx.send(Input::Failed(format!("cannot read input: {e}")));
                        return;
                    }
                }
                if run.len() == BATCH || input.buffer().is_empty() {
                    let full = std::mem::replace(&mut run, Vec::with_capacity(BATCH));
                    if tx.send(Input::Lines(full)).is_err() {
                        return; // the command ended
                    }
                }
            }
            if !run.is_empty() {
                let _ = tx.send(Input::Lines(run));
            }
        })
        .map_err(|e| CliError(format!("cannot start the input thread: {e}")))?;
    Ok(rx)
}

/// `stellflow produce`
pub fn produce(env: &Env, a: &ProduceArgs) -> CliResult {
    let count = env.topic_partitions(&a.topic, a.partitions)?;
    if let Some(p) = a.partition.filter(|p| !(0..count).contains(p)) {
        return fail(format!(
            "{} has {count} partition(s); partition {p} does not exist",
            a.topic
        ));
    }
    let input: Box<dyn Read + Send> = match &a.file {
        Some(path) => Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError(format!("cannot open {}: {e}", path.display())))?,
        ),
        None => Box::new(std::io::stdin()),
    };
    // No bar while someone types the lines.
    let typing = a.file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin());
    let lines = spawn_reader(input)?;
    let _watch = env.watch_leaders(&a.topic);
    let producer = env.client.producer();
    let start = Instant::now();
    let mut queue = VecDeque::new();
    let mut failed = Failed::default();
    let (mut sent, mut bytes) = (0u64, 0u64);
    let mut progress = Progress::new("produce", None).hidden(typing);
    // Given explicitly, --timeout ends the run: reading stops, and what has no outcome by
    // then counts as not produced.
    let mut timed_out = false;
    loop {
        let next = match env.deadline {
            Some(d) => match lines.recv_timeout(d.saturating_duration_since(Instant::now())) {
                Ok(next) => Some(next),
                Err(RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => None,
            },
            None => lines.recv().ok(),
        };
        match next {
            None => break,
            Some(Input::Failed(e)) => return fail(e),
            Some(Input::Lines(run)) => {
                let n = run.len();
                let records: Vec<Record> = run
                    .iter()
                    .map(|line| {
                        bytes += line.len() as u64;
                        progress.add(1, line.len() as u64);
                        to_record(a, line)
                    })
                    .collect();
                sent += n as u64;
                // With a deadline, the wait for buffer room is capped by what is left of it
                // (records not queued by then fail with BufferFull and are counted below).
                let queued = match env.deadline {
                    Some(d) => producer
                        .enqueue_all_within(records, d.saturating_duration_since(Instant::now())),
                    None => producer.enqueue_all(records),
                };
                match queued {
                    Ok(d) => queue.push_back((d, n)),
                    Err(e) => failed.add(&e, n as u64),
                }
                reap_batches(&mut queue, false, &mut failed);
            }
        }
        if env.deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            break;
        }
    }
    match env.deadline {
        None => {
            producer.flush()?;
            reap_batches(&mut queue, true, &mut failed);
        }
        Some(d) => {
            // Outcomes until just past the deadline (the records' own delivery timeouts,
            // counted from their enqueue, end then, with their reasons); linger sends the
            // last batch by itself.
            let d = d + GRACE;
            while !queue.is_empty() && Instant::now() < d {
                reap_batches(&mut queue, false, &mut failed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            reap_batches(&mut queue, false, &mut failed);
            let late = queue.iter().map(|(_, n)| *n as u64).sum::<u64>();
            if late > 0 {
                timed_out = true;
                failed.count += late;
                failed.first.get_or_insert_with(|| {
                    format!(
                        "record not delivered within --timeout {:?} (it may have been written)",
                        env.timeout
                    )
                });
                // Past the deadline nothing is waited for: the client is not closed
                // gracefully (its close would wait for these records), the process ends.
                std::mem::forget(env.client.clone());
            }
        }
    }
    progress.finish();
    let secs = start.elapsed().as_secs_f64();
    let cut = if timed_out {
        format!(
            " (--timeout {:?} reached: stopped after reading {sent} record(s))",
            env.timeout
        )
    } else {
        String::new()
    };
    if let Some(first) = failed.first {
        return fail(format!(
            "{} of {sent} record(s) not produced to {} in {secs:.3} s{cut}; the first: {first}",
            failed.count, a.topic
        ));
    }
    if timed_out {
        return fail(format!(
            "produced {sent} record(s), {bytes} byte(s), to {} in {secs:.3} s, then stopped: \
             --timeout {:?} reached before the end of the input",
            a.topic, env.timeout
        ));
    }
    eprintln!(
        "produced {sent} record(s), {bytes} byte(s), to {} in {secs:.3} s",
        a.topic
    );
    Ok(())
}

/// One input line as a record (split into key and value at `--key-separator`).
fn to_record(a: &ProduceArgs, line: &str) -> Record {
    let (key, value) = match &a.key_separator {
        Some(sep) => match line.split_once(sep.as_str()) {
            Some((k, v)) => (Some(k.as_bytes()), v),
            None => (None, line),
        },
        None => (None, line),
    };
    let mut record = Record::new(a.topic.as_str(), value.as_bytes().to_vec());
    record.partition = a.partition;
    record.key = key.map(|k| k.to_vec().into());
    record
}
