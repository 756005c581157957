//! Large groups on the simulated cluster, in virtual time (`stellflow_dst::group::scale`):
//! groups of 5, 10, 50 and 100 members over 1,024 partitions (session 10 s, heartbeat 1 s)
//! through a join, a close and a crash. Prints, per group size, the time to converge after
//! each change, the group requests per member per second (steady, and over the changes),
//! and the registry bytes each member reads per heartbeat interval beside the least this
//! server allows, as `RESULT <name> <value> <unit>` lines.
//!
//! `cargo run --release -p stellflow-dst --example group_scale` (`GROUP_SCALE_MEMBERS=5,100`
//! and `GROUP_SCALE_PARTITIONS=1024` choose other sizes).

use std::time::Duration;
use stellflow_dst::group::scale::{ScaleConfig, run_scale};

fn list(name: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    text.split(',')
        .map(|v| match v.trim().parse() {
            Ok(n) => n,
            Err(e) => panic!("{name}: {v:?} is not a number: {e}"),
        })
        .collect()
}

fn main() {
    let partitions = list("GROUP_SCALE_PARTITIONS", "1024")[0] as i32;
    for members in list("GROUP_SCALE_MEMBERS", "5,10,50,100") {
        let cfg = ScaleConfig {
            seed: 44,
            members,
            partitions,
            session: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            steady_heartbeats: 20,
        };
        let wall = std::time::Instant::now();
        let r = run_scale(cfg);
        let name = format!("group_{members}x{partitions}");
        let ms = |d: Duration| d.as_millis();
        println!("RESULT {name}_start {} ms", ms(r.start));
        println!("RESULT {name}_join {} ms", ms(r.join));
        println!("RESULT {name}_close {} ms", ms(r.close));
        println!("RESULT {name}_crash {} ms", ms(r.crash));
        println!(
            "RESULT {name}_requests_steady {:.2} per-member-s",
            r.steady_requests_per_member_s
        );
        println!(
            "RESULT {name}_requests_changes {:.2} per-member-s",
            r.change_requests_per_member_s
        );
        println!(
            "RESULT {name}_reads {:.2} per-member-heartbeat",
            r.reads_per_heartbeat
        );
        println!("RESULT {name}_read_size {} bytes", r.bytes_per_read);
        println!(
            "RESULT {name}_registry_read {:.0} bytes-per-member-heartbeat",
            r.bytes_per_heartbeat
        );
        println!(
            "RESULT {name}_registry_forced {:.0} bytes-per-member-heartbeat",
            r.forced_bytes_per_heartbeat
        );
        eprintln!("{name}: {:.1} s of wall time", wall.elapsed().as_secs_f64());
    }
}
