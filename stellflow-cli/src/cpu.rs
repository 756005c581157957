//! The process's CPU time, for the `perf` commands' CPU-per-record figures (the adapters'
//! `perf` examples include this file too, from their non-published harness crate).

use std::time::Duration;

/// The CPU time this process has used so far — user plus system, all its threads — as the OS
/// counts it (`CLOCK_PROCESS_CPUTIME_ID`); `None` where that clock is not read (not Unix).
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u32::try_from(t.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }
    #[cfg(not(unix))]
    None
}

/// The CPU time used since `start` (a [`process_cpu_time`] reading).
pub fn cpu_since(start: Option<Duration>) -> Option<Duration> {
    Some(process_cpu_time()?.saturating_sub(start?))
}

/// `, X ns CPU/record (user + system)` for a run of `records` that used `cpu`, or nothing when
/// the CPU time is unknown.
pub fn cpu_per_record(cpu: Option<Duration>, records: u64) -> String {
    match cpu {
        Some(cpu) if records > 0 => format!(
            ", {:.0} ns CPU/record ({:.3} s CPU, user + system)",
            cpu.as_nanos() as f64 / records as f64,
            cpu.as_secs_f64()
        ),
        _ => String::new(),
    }
}
