//! `stellflow offsets`: each partition's log start and end, and a group's committed positions.

use crate::{CliResult, Global};
use clap::Args;
use stellflow_blocking::OffsetSpec;

/// `stellflow offsets`
#[derive(Args, Debug)]
pub struct OffsetsArgs {
    /// Topic.
    pub topic: String,
    /// Also show this group's committed positions.
    #[arg(long, short = 'g')]
    pub group: Option<String>,
}

/// `stellflow offsets`
pub fn offsets(g: &Global, a: &OffsetsArgs) -> CliResult {
    let env = g.connect(|_| {})?;
    let count = env.topic_partitions(&a.topic, 1)?;
    let admin = env.client.admin();
    let mut specs = Vec::new();
    for p in 0..count {
        specs.push((a.topic.as_str(), p, OffsetSpec::Earliest));
        specs.push((a.topic.as_str(), p, OffsetSpec::Latest));
    }
    let listed = admin.list_offsets(&specs)?;
    // The group's committed positions, in partition order (OffsetFetch; nobody joins it).
    let committed = match &a.group {
        Some(group) => {
            let parts: Vec<(&str, i32)> = (0..count).map(|p| (a.topic.as_str(), p)).collect();
            admin.committed_offsets(group, &parts)?
        }
        None => Vec::new(),
    };
    let group_col = if a.group.is_some() { "  COMMITTED" } else { "" };
    println!(
        "{:<9} {:>12} {:>12}{group_col}",
        "PARTITION", "EARLIEST", "LATEST"
    );
    for (p, pair) in listed.chunks(2).enumerate() {
        let show = |l: &stellflow_blocking::ListedOffset| match &l.result {
            Ok(o) => o.offset.to_string(),
            Err(e) => format!("error: {e}"),
        };
        let c = match committed.get(p).map(|c| &c.result) {
            None => String::new(),
            Some(Ok(Some(pos))) => format!("  {pos}"),
            Some(Ok(None)) => "  -".into(),
            Some(Err(e)) => format!("  error: {e}"),
        };
        let (e, l) = (pair.first().map(show), pair.get(1).map(show));
        println!(
            "{:<9} {:>12} {:>12}{c}",
            format!("{}-{p}", a.topic),
            e.unwrap_or_default(),
            l.unwrap_or_default()
        );
    }
    Ok(())
}
