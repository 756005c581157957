//! `stellflow consume`: where to start, reading records, and writing them as text or JSON
//! (with its base64 encoder for keys and values that are not UTF-8).

use crate::progress::Progress;
use crate::{CliResult, Env, fail};
use clap::Args;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};
use stellflow_blocking::{
    ConsumerEvent, ConsumerRecord, OffsetReset, Position, SeekTo, TopicPartition,
};

/// How long `consume` waits for a topic no broker knows before it fails (the client's
/// `consumer.missing_topic_wait`; at most half the idle timeout).
const MISSING_TOPIC_WAIT: Duration = Duration::from_secs(1);

/// Where `consume` starts.
#[derive(Debug, Clone, Copy)]
pub enum From {
    /// The log start (or the committed position of the group).
    Earliest,
    /// The log end (or the committed position of the group).
    Latest,
    /// An exact position: `OFFSET` or `OFFSET#INDEX`.
    At(Position),
}

fn parse_from(s: &str) -> Result<From, String> {
    match s {
        "earliest" | "beginning" => Ok(From::Earliest),
        "latest" | "end" => Ok(From::Latest),
        _ => {
            let (o, i) = s.split_once('#').unwrap_or((s, "0"));
            match (o.parse::<i64>(), i.parse::<u32>()) {
                (Ok(o), Ok(i)) if o >= 0 => Ok(From::At(Position::new(o, i))),
                _ => Err("expected earliest, latest, OFFSET or OFFSET#INDEX".into()),
            }
        }
    }
}

/// `stellflow consume`
#[derive(Args, Debug)]
pub struct ConsumeArgs {
    /// Topic to read.
    pub topic: String,
    /// Where to start without a committed position: earliest, latest, OFFSET or OFFSET#INDEX
    /// (an offset seeks every assigned partition there).
    #[arg(long, default_value = "earliest", value_parser = parse_from)]
    pub from: From,
    /// Partitions to assign (comma-separated; default: all of the topic, or the group's share).
    #[arg(long, short = 'p', value_delimiter = ',')]
    pub partition: Vec<i32>,
    /// Consumer group: start at its committed positions and commit what was printed.
    #[arg(long, short = 'g')]
    pub group: Option<String>,
    /// Stop after this many records (fails when fewer arrive before the idle timeout).
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Stop after this many seconds without a record (0: never).
    #[arg(long, default_value_t = 5.0)]
    pub idle_timeout: f64,
    /// One JSON object per record: topic, partition, offset, index, timestamp, key, value.
    /// A key or value that is valid UTF-8 is a JSON string under "key"/"value"; any other
    /// bytes are standard base64 under "key_base64"/"value_base64" instead (lossless); an
    /// absent key or value is null.
    #[arg(long)]
    pub json: bool,
    /// Print `key<TAB>value` (plain output: the raw bytes, as with values alone).
    #[arg(long)]
    pub print_key: bool,
    /// Print no records, only the summary (with a progress bar on a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Partitions of the topic when the embedded broker creates it.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
}

impl ConsumeArgs {
    /// Consumer settings from the arguments.
    pub fn tune(&self, c: &mut stellflow_blocking::ClientConfig) {
        c.consumer.group_id.clone_from(&self.group);
        // A topic no broker knows ends the command soon (before the idle timeout would end
        // it as a success with nothing read).
        let idle = Duration::try_from_secs_f64(self.idle_timeout).unwrap_or(Duration::ZERO);
        c.consumer.missing_topic_wait = if idle.is_zero() {
            MISSING_TOPIC_WAIT
        } else {
            MISSING_TOPIC_WAIT.min(idle / 2)
        };
        c.consumer.enable_auto_commit = false;
        c.consumer.auto_offset_reset = match self.from {
            From::Latest => OffsetReset::Latest,
            _ => OffsetReset::Earliest,
        };
    }
}

/// Adds `bytes` to a JSON object as `name` (a string) when they are valid UTF-8, else as
/// `name_base64` (standard base64 with padding); `null` under `name` when absent. Lossless.
fn json_bytes(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    bytes: Option<&[u8]>,
) {
    let (name, v) = match bytes {
        None => (name.to_owned(), serde_json::Value::Null),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) => (name.to_owned(), text.into()),
            Err(_) => (format!("{name}_base64"), base64(b).into()),
        },
    };
    obj.insert(name, v);
}

/// Standard base64 (RFC 4648 §4, `+/` alphabet) with padding.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn write_record(out: &mut impl Write, r: &ConsumerRecord, a: &ConsumeArgs) -> std::io::Result<()> {
    let value = r.value.as_deref().unwrap_or_default();
    if a.json {
        let mut obj = serde_json::Map::new();
        obj.insert("topic".into(), serde_json::Value::from(&*r.topic));
        obj.insert("partition".into(), r.partition.into());
        obj.insert("offset".into(), r.offset.into());
        obj.insert("index".into(), r.index.into());
        obj.insert("timestamp".into(), r.timestamp.into());
        json_bytes(&mut obj, "key", r.key.as_deref());
        json_bytes(&mut obj, "value", r.value.as_deref());
        writeln!(out, "{}", serde_json::Value::Object(obj))
    } else {
        if a.print_key {
            out.write_all(r.key.as_deref().unwrap_or_default())?;
            out.write_all(b"\t")?;
        }
        out.write_all(value)?;
        out.write_all(b"\n")
    }
}

/// `stellflow consume`
pub fn consume(env: &Env, a: &ConsumeArgs) -> CliResult {
    let consumer = env.client.consumer();
    let subscribe = a.group.is_some() && a.partition.is_empty();
    // A topic no broker knows is the client's to report (an event, then an error from
    // poll): a group subscribes without asking, and an assignment without a partition
    // count takes the partitions given, or partition 0.
    let count = if subscribe {
        None
    } else {
        env.known_partitions(&a.topic, a.partitions)?
    };
    let _watch = env.watch_leaders(&a.topic);
    let parts: Vec<TopicPartition> = if a.partition.is_empty() {
        (0..count.unwrap_or(1))
            .map(|p| TopicPartition::new(&a.topic, p))
            .collect()
    } else {
        if let Some(count) = count
            && let Some(p) = a.partition.iter().find(|p| !(0..count).contains(*p))
        {
            return fail(format!(
                "{} has {count} partition(s); partition {p} does not exist",
                a.topic
            ));
        }
        a.partition
            .iter()
            .map(|p| TopicPartition::new(&a.topic, *p))
            .collect()
    };
    if subscribe {
        if matches!(a.from, From::At(_)) {
            return fail(
                "--from OFFSET needs assigned partitions: give --partition or omit --group",
            );
        }
        consumer.subscribe(&[a.topic.as_str()])?;
    } else {
        consumer.assign(&parts)?;
        if let From::At(pos) = a.from {
            for tp in &parts {
                consumer.seek(tp, SeekTo::Position(pos))?;
            }
        }
    }
    let idle = (a.idle_timeout > 0.0).then(|| Duration::from_secs_f64(a.idle_timeout));
    let want = a.count.unwrap_or(u64::MAX);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout.lock());
    let mut progress = Progress::new("consume", a.count).hidden(!a.quiet);
    let mut last_at: BTreeMap<TopicPartition, Position> = BTreeMap::new();
    let (start, mut last_record) = (Instant::now(), Instant::now());
    let mut got = 0u64;
    'poll: while got < want {
        let batch = match consumer.poll(Duration::from_millis(100)) {
            Ok(batch) => batch,
            Err(e) => {
                let _ = out.flush();
                progress.finish();
                return fail(format!("{e} (after {got} record(s) from {})", a.topic));
            }
        };
        if batch.is_empty() {
            // Nothing more for now: what was printed reaches a reading program at once,
            // not when the buffer fills.
            if out.flush().is_err() {
                break; // stdout closed (e.g. `| head`)
            }
            if idle.is_some_and(|d| last_record.elapsed() >= d) {
                break;
            }
            for e in consumer.events() {
                match e {
                    ConsumerEvent::TopicUnknown { topic, error_after } => eprintln!(
                        "(waiting: no broker knows topic {topic}; giving up in {:.1} s unless it is created)",
                        error_after.as_secs_f64()
                    ),
                    ConsumerEvent::FetchError { partition, code } => {
                        eprintln!("stellflow: warning: fetch of {partition} failed with {code}");
                    }
                    ConsumerEvent::PositionOutOfRange {
                        partition,
                        position,
                        log_end,
                        action,
                    } => eprintln!(
                        "stellflow: warning: {partition} position {position} is past the log \
                         end {log_end} (topic re-created?): {action:?}"
                    ),
                    ConsumerEvent::FetchTooLarge {
                        partition,
                        offset,
                        size,
                        max,
                    } => eprintln!(
                        "stellflow: warning: {partition} blob {offset} needs a {size}-byte \
                         answer, over the {max}-byte limit: partition stopped"
                    ),
                    _ => {}
                }
            }
            continue;
        }
        last_record = Instant::now();
        let mut bytes = 0;
        let mut n = 0;
        for r in &batch {
            if got == want {
                break;
            }
            got += 1;
            n += 1;
            bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
            last_at.insert(
                TopicPartition::new(&r.topic, r.partition),
                r.next_position(),
            );
            if !a.quiet && write_record(&mut out, r, a).is_err() {
                break 'poll; // stdout closed (e.g. `| head`)
            }
        }
        progress.add(n, bytes);
    }
    let _ = out.flush();
    progress.finish();
    if a.group.is_some() && !last_at.is_empty() {
        consumer.commit_positions(last_at.into_iter().collect())?;
    }
    let secs = start.elapsed().as_secs_f64();
    if got < want && a.count.is_some() {
        return fail(format!(
            "only {got} of {want} record(s) from {} before {:.1} s without records",
            a.topic, a.idle_timeout
        ));
    }
    eprintln!("consumed {got} record(s) from {} in {secs:.3} s", a.topic);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0x00, 0xfe, b'a']), "/wD+YQ==");
    }
}
