//! `stellflow produce`: lines from stdin or a file become records, with progress and
//! delivery outcomes reaped as they complete.

use crate::progress::Progress;
use crate::{CliError, CliResult, Env, ProducerOpts, fail};
use clap::Args;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Instant;
use stellflow_blocking::{BatchDelivery, Delivery, Record};

/// Records sent with one `enqueue_all` at most; a batch is also sent as soon as the input has
/// no more lines buffered (so lines typed or trickling in go out at once).
const BATCH: usize = 1024;

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

/// Like [`reap`], for the outcomes of batches.
fn reap_batches(queue: &mut VecDeque<BatchDelivery>, all: bool) -> CliResult<u64> {
    let mut n = 0;
    while let Some(mut p) = queue.pop_front() {
        let results = match p.try_wait() {
            Some(results) => results,
            None if all => p.wait(),
            None => {
                queue.push_front(p);
                break;
            }
        };
        for r in results {
            r.map_err(|e| CliError(format!("record not delivered: {e}")))?;
            n += 1;
        }
    }
    Ok(n)
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
    let input: Box<dyn Read> = match &a.file {
        Some(path) => Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError(format!("cannot open {}: {e}", path.display())))?,
        ),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let _watch = env.watch_leaders(&a.topic);
    let producer = env.client.producer();
    let start = Instant::now();
    let mut queue = VecDeque::new();
    let (mut sent, mut bytes) = (0u64, 0u64);
    // No bar while someone types the lines.
    let typing = a.file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut progress = Progress::new("produce", None).hidden(typing);
    let mut batch = Vec::with_capacity(BATCH);
    let mut line = String::new();
    loop {
        line.clear();
        let read = input.read_line(&mut line);
        let end = read.map_err(|e| CliError(format!("cannot read input: {e}")))? == 0;
        if !end {
            if line.ends_with('\n') {
                line.pop();
                if line.ends_with('\r') {
                    line.pop();
                }
            }
            batch.push(to_record(a, &line));
            sent += 1;
            bytes += line.len() as u64;
            progress.add(1, line.len() as u64);
        }
        // Send what was read once the input has nothing more buffered: lines that trickle
        // in go out at once, a file goes in batches of up to BATCH records.
        if end || batch.len() == BATCH || input.buffer().is_empty() {
            if !batch.is_empty() {
                queue.push_back(producer.enqueue_all(batch.drain(..))?);
            }
            reap_batches(&mut queue, false)?;
        }
        if end {
            break;
        }
    }
    producer.flush()?;
    reap_batches(&mut queue, true)?;
    progress.finish();
    eprintln!(
        "produced {sent} record(s), {bytes} byte(s), to {} in {:.3} s",
        a.topic,
        start.elapsed().as_secs_f64()
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
