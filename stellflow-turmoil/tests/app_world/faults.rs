//! The faults of one world, drawn from its seed: when each starts, what it does, when it ends.

use std::fmt;
use std::time::Duration;
use stellflow_sim::rng::SimRng;

/// One fault and how long it lasts.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Instance `i` (`app-<i>`) crashes and its host starts the service again after `down`.
    CrashInstance { instance: usize, down: Duration },
    /// Broker `id` crashes and restarts on its data after `down`.
    CrashBroker { broker: i32, down: Duration },
    /// Nothing passes between instance `i` and broker `id` for `lasting`.
    Partition {
        instance: usize,
        broker: i32,
        lasting: Duration,
    },
    /// Messages between instance `i` and broker `id` take up to `max` for `lasting`.
    Latency {
        instance: usize,
        broker: i32,
        max: Duration,
        lasting: Duration,
    },
    /// The leadership of input partition `partition` moves to broker `to` (if it is in sync).
    MoveLeader { partition: i32, to: i32 },
}

/// What the plan does at one instant.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Start(Fault),
    End(Fault),
}

/// A world's faults, in the order they start and end.
pub struct Plan {
    pub instances: usize,
    pub steps: Vec<(Duration, Step)>,
}

/// Faults start within this much of the world's start; every one has ended a few seconds later.
pub const FAULT_WINDOW: Duration = Duration::from_millis(3000);

fn ms(rng: &mut SimRng, from: u64, to: u64) -> Duration {
    Duration::from_millis(from + rng.below(to - from))
}

impl Plan {
    /// The plan of world `seed`: two or three instances, two to six faults.
    pub fn new(seed: u64, brokers: i32, partitions: i32) -> Plan {
        let mut rng = SimRng::new(seed ^ 0xfa17_5eed_0000_0043);
        let instances = 2 + rng.below(2) as usize;
        let mut steps = Vec::new();
        for _ in 0..2 + rng.below(5) {
            let at = ms(&mut rng, 100, FAULT_WINDOW.as_millis() as u64);
            let instance = 1 + rng.below(instances as u64) as usize;
            let broker = 1 + rng.below(brokers as u64) as i32;
            let fault = match rng.below(5) {
                0 => Fault::CrashInstance {
                    instance,
                    down: ms(&mut rng, 100, 1500),
                },
                1 => Fault::CrashBroker {
                    broker,
                    down: ms(&mut rng, 300, 1500),
                },
                2 => Fault::Partition {
                    instance,
                    broker,
                    lasting: ms(&mut rng, 200, 1500),
                },
                3 => Fault::Latency {
                    instance,
                    broker,
                    max: ms(&mut rng, 5, 60),
                    lasting: ms(&mut rng, 300, 1500),
                },
                _ => Fault::MoveLeader {
                    partition: rng.below(partitions as u64) as i32,
                    to: broker,
                },
            };
            let lasting = match fault {
                Fault::CrashInstance { down, .. } | Fault::CrashBroker { down, .. } => down,
                Fault::Partition { lasting, .. } | Fault::Latency { lasting, .. } => lasting,
                Fault::MoveLeader { .. } => Duration::ZERO,
            };
            steps.push((at, Step::Start(fault)));
            if !lasting.is_zero() {
                steps.push((at + lasting, Step::End(fault)));
            }
        }
        steps.sort_by_key(|(at, _)| *at);
        Plan { instances, steps }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} instances", self.instances)?;
        for (at, step) in &self.steps {
            writeln!(f, "  {:>6} ms {step:?}", at.as_millis())?;
        }
        Ok(())
    }
}
