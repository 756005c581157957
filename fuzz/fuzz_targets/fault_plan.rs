//! Fuzz target `fault_plan`: fuzzer bytes become a deterministic-simulation fault plan
//! (`FaultPlan::from_bytes`: cluster size, clients, network shape, workload and timed faults);
//! the world runs it and every invariant must hold. A crash prints the plan with its
//! `STELLFLOW_SIM_PLAN` replay code (`cargo test -p stellflow-dst --test simulation`).
//! Every workload option is fuzzed, producer idempotence included.
#![no_main]

use stellflow_dst::{FaultPlan, run_plan};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let plan = FaultPlan::from_bytes(data);
    let report = run_plan(&plan);
    if let Some(v) = report.violations.first() {
        panic!("{v}\n{plan}");
    }
});
