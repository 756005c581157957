//! Shrinking a failing plan: delta debugging (ddmin) over its faults, then smaller scenario
//! numbers (fewer clients, brokers, partitions, commands, a shorter safety phase), keeping
//! every change under which the run still breaks the same invariant.

use super::plan::FaultPlan;
use super::run::run_plan;

/// Shrinks `plan`, which must fail with `invariant`, within `budget` runs. Returns the
/// smallest failing plan found.
pub fn shrink(plan: &FaultPlan, invariant: &str, budget: usize) -> FaultPlan {
    let runs = std::cell::Cell::new(0usize);
    let fails = |p: &FaultPlan| -> bool {
        runs.set(runs.get() + 1);
        run_plan(p)
            .violations
            .first()
            .is_some_and(|v| v.invariant == invariant)
    };
    let mut best = plan.clone();
    best.faults = ddmin(&best.faults, budget, &runs, |faults| {
        let mut cand = best.clone();
        cand.faults = faults.to_vec();
        fails(&cand)
    });
    // Smaller numbers.
    type Knob = fn(&mut FaultPlan) -> bool;
    let knobs: [Knob; 5] = [
        |p| halve(&mut p.scenario.clients, 1),
        |p| halve(&mut p.scenario.ops, 1),
        |p| halve(&mut p.scenario.partitions, 1),
        |p| {
            let ok = halve(&mut p.scenario.brokers, 1);
            p.scenario.replication = p.scenario.replication.min(p.scenario.brokers);
            ok
        },
        |p| {
            let last = p.faults.iter().map(|f| f.at_ms).max();
            halve_safety(&mut p.scenario.safety_ms, last)
        },
    ];
    shrink_numbers(best, &knobs, budget, &runs, fails)
}

/// Delta debugging (ddmin) over `items`: the smallest sub-list found within `budget` runs
/// (counted in `runs`, shared with the caller) for which `fails` still holds, ending with a
/// try of the empty list when one item is left.
pub(crate) fn ddmin<T: Clone>(
    items: &[T],
    budget: usize,
    runs: &std::cell::Cell<usize>,
    mut fails: impl FnMut(&[T]) -> bool,
) -> Vec<T> {
    let mut best = items.to_vec();
    let mut n = 2usize;
    while best.len() >= 2 && runs.get() < budget {
        let chunk = best.len().div_ceil(n);
        let mut reduced = false;
        for start in (0..best.len()).step_by(chunk.max(1)) {
            if runs.get() >= budget {
                break;
            }
            let mut cand = best.clone();
            let end = (start + chunk).min(cand.len());
            cand.drain(start..end);
            if fails(&cand) {
                best = cand;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= best.len() {
                break;
            }
            n = (n * 2).min(best.len());
        }
    }
    if best.len() == 1 && runs.get() < budget && fails(&[]) {
        best.clear();
    }
    best
}

/// Applies each knob of `knobs` to `best` for as long as the plan still fails and the knob still
/// changes something, within `budget` runs (counted in `runs`); the smallest failing plan.
pub(crate) fn shrink_numbers<P: Clone>(
    mut best: P,
    knobs: &[fn(&mut P) -> bool],
    budget: usize,
    runs: &std::cell::Cell<usize>,
    fails: impl Fn(&P) -> bool,
) -> P {
    for knob in knobs {
        loop {
            if runs.get() >= budget {
                return best;
            }
            let mut cand = best.clone();
            if !knob(&mut cand) || !fails(&cand) {
                break;
            }
            best = cand;
        }
    }
    best
}

/// Halves a safety phase of `safety_ms`, keeping it past the last planned event (`last_ms`,
/// when there is one); whether it changed.
pub(crate) fn halve_safety(safety_ms: &mut u32, last_ms: Option<u32>) -> bool {
    let min = last_ms.map_or(1, |at| at + 1);
    let half = (*safety_ms / 2).max(min);
    let changed = half < *safety_ms;
    *safety_ms = half;
    changed
}

/// Halves `v` (not below `min`); whether it changed.
pub(crate) fn halve(v: &mut u32, min: u32) -> bool {
    if *v > min {
        *v = min.max(*v / 2).max(min);
        true
    } else {
        false
    }
}
