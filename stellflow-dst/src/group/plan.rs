//! Group plans: the shape of a group world ([`GroupScenario`]) and its timed membership
//! changes and faults ([`GroupEvent`]), derived from a seed ([`GroupPlan::from_seed`]),
//! printable and replayable ([`GroupPlan::to_code`] / [`GroupPlan::parse`]).

use std::fmt;
use stellflow_sim::rng::SimRng;

/// Most members a group world holds at once (joins beyond it are skipped).
pub const MAX_MEMBERS: usize = 5;

/// The shape of a group world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupScenario {
    /// Brokers (ids `1..=brokers`); broker 1 is the group's coordinator.
    pub brokers: u32,
    /// Partitions of the topic `t0` (replication factor 1, spread over the brokers).
    pub partitions: u32,
    /// Members started at the beginning (more join through [`GroupEvent::Join`]).
    pub members: u32,
    /// The members' session timeout in milliseconds.
    pub session_ms: u32,
    /// The members' heartbeat interval in milliseconds.
    pub heartbeat_ms: u32,
    /// One-way network latency in microseconds.
    pub latency_us: u32,
    /// Extra random latency per segment in microseconds.
    pub jitter_us: u32,
    /// Probability in percent that a write is split at a random boundary.
    pub split_pct: u32,
    /// Records the producer writes during the safety phase.
    pub records: u32,
    /// Share of the records with a key, in percent (the rest have none).
    pub keyed_pct: u32,
    /// Length of the safety phase (membership changes and faults) in milliseconds.
    pub safety_ms: u32,
    /// Bits choosing per-member behaviour: bit `i` set makes the `i`-th member started
    /// auto-commit (else it commits explicitly every [`super::COMMIT_EVERY`]).
    pub commit_bits: u32,
    /// 1: static members (each started with its own `group.instance.id`); 0: dynamic.
    pub static_members: u32,
}

/// A membership change or fault in a group world. Member selectors pick among the members
/// alive at that moment (modulo their count, oldest first), so a plan stays valid when
/// shrinking drops an earlier event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupEvent {
    /// A new member starts and subscribes (skipped when [`MAX_MEMBERS`] are alive).
    Join,
    /// A member closes gracefully (`close_consumer`, then `close` once it reports `Closed`).
    Close {
        /// Selector among the live members.
        member: u32,
    },
    /// A member crashes: dropped without any close, its sockets gone.
    Crash {
        /// Selector among the live members.
        member: u32,
    },
    /// A member's process stops for `for_ms` (nothing drives it, as under SIGSTOP), then
    /// continues.
    Pause {
        /// Selector among the live members.
        member: u32,
        /// Duration in virtual milliseconds.
        for_ms: u32,
    },
    /// A member is cut off from the coordinator (broker 1) for `for_ms`; its links to other
    /// brokers keep working.
    Isolate {
        /// Selector among the live members.
        member: u32,
        /// Duration in virtual milliseconds.
        for_ms: u32,
    },
    /// The `link`-th open connection of the world is reset.
    Reset {
        /// Selector among open links.
        link: u32,
    },
    /// A static member crashes and a new member starts under its instance id `after_ms`
    /// later (a restart within the session).
    Restart {
        /// Selector among the live members.
        member: u32,
        /// Virtual milliseconds between the crash and the new start.
        after_ms: u32,
    },
    /// A second member starts under the instance id of a live one (two processes with one
    /// id): the older is fenced.
    Twin {
        /// Selector among the live members.
        member: u32,
    },
    /// Every response is delayed by `delay_ms` for `for_ms`.
    Delay {
        /// Added response delay in milliseconds.
        delay_ms: u32,
        /// Duration in virtual milliseconds.
        for_ms: u32,
    },
}

impl GroupEvent {
    /// How long the event lasts (0 for an instant one).
    pub fn duration_ms(&self) -> u32 {
        match *self {
            GroupEvent::Pause { for_ms, .. }
            | GroupEvent::Isolate { for_ms, .. }
            | GroupEvent::Delay { for_ms, .. } => for_ms,
            _ => 0,
        }
    }

    fn encode(&self) -> (&'static str, Vec<u32>) {
        match *self {
            GroupEvent::Join => ("join", vec![]),
            GroupEvent::Close { member } => ("close", vec![member]),
            GroupEvent::Crash { member } => ("crash", vec![member]),
            GroupEvent::Pause { member, for_ms } => ("pause", vec![member, for_ms]),
            GroupEvent::Isolate { member, for_ms } => ("isolate", vec![member, for_ms]),
            GroupEvent::Reset { link } => ("reset", vec![link]),
            GroupEvent::Restart { member, after_ms } => ("restart", vec![member, after_ms]),
            GroupEvent::Twin { member } => ("twin", vec![member]),
            GroupEvent::Delay { delay_ms, for_ms } => ("delay", vec![delay_ms, for_ms]),
        }
    }

    fn decode(name: &str, a: &[u32]) -> Option<GroupEvent> {
        let u = |i: usize| a.get(i).copied();
        Some(match name {
            "join" => GroupEvent::Join,
            "close" => GroupEvent::Close { member: u(0)? },
            "crash" => GroupEvent::Crash { member: u(0)? },
            "pause" => GroupEvent::Pause {
                member: u(0)?,
                for_ms: u(1)?,
            },
            "isolate" => GroupEvent::Isolate {
                member: u(0)?,
                for_ms: u(1)?,
            },
            "reset" => GroupEvent::Reset { link: u(0)? },
            "restart" => GroupEvent::Restart {
                member: u(0)?,
                after_ms: u(1)?,
            },
            "twin" => GroupEvent::Twin { member: u(0)? },
            "delay" => GroupEvent::Delay {
                delay_ms: u(0)?,
                for_ms: u(1)?,
            },
            _ => return None,
        })
    }
}

/// An event at a virtual time (milliseconds after the start of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedEvent {
    /// When, in virtual milliseconds since the start.
    pub at_ms: u32,
    /// What.
    pub event: GroupEvent,
}

/// A group world: its seed, shape and timed events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    /// The seed of the world.
    pub seed: u64,
    /// The shape of the run.
    pub scenario: GroupScenario,
    /// Events, sorted by time.
    pub events: Vec<PlannedEvent>,
}

impl GroupPlan {
    /// The plan of `seed`: every choice comes from a generator seeded with it.
    pub fn from_seed(seed: u64) -> GroupPlan {
        let mut rng = SimRng::new(seed ^ 0x9c0d_6a11_0000_0026);
        let session_ms = 3_000 + 1_000 * rng.below(4) as u32;
        let scenario = GroupScenario {
            brokers: 1 + rng.below(2) as u32,
            partitions: 2 + rng.below(7) as u32,
            members: 2 + rng.below(3) as u32,
            session_ms,
            heartbeat_ms: session_ms / [3, 4, 6][rng.below(3) as usize],
            latency_us: 50 + rng.below(2_000) as u32,
            jitter_us: rng.below(3_000) as u32,
            split_pct: [0, 20, 50, 80][rng.below(4) as usize],
            records: 40 + rng.below(160) as u32,
            keyed_pct: [0, 50, 100, 80][rng.below(4) as usize],
            safety_ms: 12_000 + rng.below(18_000) as u32,
            commit_bits: rng.next_u64() as u32,
            static_members: 0,
        };
        let n = 2 + rng.below(6);
        let mut events = Vec::new();
        for _ in 0..n {
            let at_ms = rng.below(u64::from(scenario.safety_ms)) as u32;
            let member = rng.below(8) as u32;
            // Pauses and isolations from half a session to two and a half sessions: some
            // end within the session, most outlast it.
            let long = session_ms / 2 + rng.below(u64::from(session_ms) * 2) as u32;
            let event = match rng.below(12) {
                0..=2 => GroupEvent::Join,
                3 | 4 => GroupEvent::Close { member },
                5 | 6 => GroupEvent::Crash { member },
                7 | 8 => GroupEvent::Pause {
                    member,
                    for_ms: long,
                },
                9 => GroupEvent::Isolate {
                    member,
                    for_ms: long,
                },
                10 => GroupEvent::Reset {
                    link: rng.below(16) as u32,
                },
                _ => GroupEvent::Delay {
                    delay_ms: 1 + rng.below(200) as u32,
                    for_ms: 200 + rng.below(2_000) as u32,
                },
            };
            events.push(PlannedEvent { at_ms, event });
        }
        events.sort_by_key(|e| e.at_ms);
        GroupPlan {
            seed,
            scenario,
            events,
        }
    }

    /// The static-membership plan of `seed`: the plan of [`GroupPlan::from_seed`] with
    /// static members, where some joins start a twin of a live member and some crashes are
    /// restarts within the session (chosen by a generator of their own, so the dynamic
    /// plans stay as they were).
    pub fn static_from_seed(seed: u64) -> GroupPlan {
        let mut plan = GroupPlan::from_seed(seed);
        plan.scenario.static_members = 1;
        let mut rng = SimRng::new(seed ^ 0x57a7_1c00_0000_0046);
        let session = u64::from(plan.scenario.session_ms);
        for e in &mut plan.events {
            e.event = match e.event {
                GroupEvent::Crash { member } if rng.below(3) > 0 => GroupEvent::Restart {
                    member,
                    after_ms: 200 + rng.below(session / 2) as u32,
                },
                GroupEvent::Join if rng.below(2) == 0 => GroupEvent::Twin {
                    member: rng.below(8) as u32,
                },
                other => other,
            };
        }
        plan
    }

    /// The plan as one line that [`GroupPlan::parse`] reads back (`STELLFLOW_GROUP_PLAN`).
    pub fn to_code(&self) -> String {
        let mut out = format!("seed={}", self.seed);
        for k in &KNOBS {
            out.push_str(&format!(";{}={}", k.key, (k.get)(&self.scenario)));
        }
        for e in &self.events {
            let (name, args) = e.event.encode();
            crate::plan::push_timed(&mut out, "e", e.at_ms, name, &args);
        }
        out
    }

    /// Reads a plan written by [`GroupPlan::to_code`]; `None` if it is malformed.
    pub fn parse(code: &str) -> Option<GroupPlan> {
        let mut plan = GroupPlan::from_seed(0);
        plan.events.clear();
        for part in code.trim().split(';').filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=')?;
            if key == "e" {
                let (at_ms, name, args) = crate::plan::parse_timed::<u32>(value)?;
                let event = GroupEvent::decode(name, &args)?;
                plan.events.push(PlannedEvent { at_ms, event });
                continue;
            }
            if key == "seed" {
                plan.seed = value.parse().ok()?;
                continue;
            }
            let knob = KNOBS.iter().find(|k| k.key == key)?;
            (knob.set)(&mut plan.scenario, value.parse().ok()?);
        }
        plan.events.sort_by_key(|e| e.at_ms);
        Some(plan)
    }
}

/// One number of a [`GroupScenario`]: its key in the plan code, how it is read and set
/// (with the bounds a replayed plan is held to), and how the readable plan says it.
struct Knob {
    key: &'static str,
    get: fn(&GroupScenario) -> u32,
    set: fn(&mut GroupScenario, u32),
    say: fn(u32) -> String,
}

/// Every number of a scenario, in the order the code and the readable plan give them.
const KNOBS: [Knob; 13] = [
    Knob {
        key: "b",
        get: |s| s.brokers,
        set: |s, v| s.brokers = v.clamp(1, 9),
        say: |v| format!("{v} broker(s)"),
    },
    Knob {
        key: "p",
        get: |s| s.partitions,
        set: |s, v| s.partitions = v.clamp(1, 64),
        say: |v| format!("t0 with {v} partition(s)"),
    },
    Knob {
        key: "m",
        get: |s| s.members,
        set: |s, v| s.members = v.clamp(1, MAX_MEMBERS as u32),
        say: |v| format!("{v} member(s) at the start"),
    },
    Knob {
        key: "session",
        get: |s| s.session_ms,
        set: |s, v| s.session_ms = v.max(100),
        say: |v| format!("session {v} ms"),
    },
    Knob {
        key: "hb",
        get: |s| s.heartbeat_ms,
        set: |s, v| s.heartbeat_ms = v.max(10),
        say: |v| format!("heartbeat {v} ms"),
    },
    Knob {
        key: "lat",
        get: |s| s.latency_us,
        set: |s, v| s.latency_us = v,
        say: |v| format!("latency {v} us"),
    },
    Knob {
        key: "jit",
        get: |s| s.jitter_us,
        set: |s, v| s.jitter_us = v,
        say: |v| format!("jitter {v} us"),
    },
    Knob {
        key: "split",
        get: |s| s.split_pct,
        set: |s, v| s.split_pct = v,
        say: |v| format!("split {v}%"),
    },
    Knob {
        key: "records",
        get: |s| s.records,
        set: |s, v| s.records = v,
        say: |v| format!("{v} records"),
    },
    Knob {
        key: "keyed",
        get: |s| s.keyed_pct,
        set: |s, v| s.keyed_pct = v,
        say: |v| format!("{v}% keyed"),
    },
    Knob {
        key: "safety",
        get: |s| s.safety_ms,
        set: |s, v| s.safety_ms = v,
        say: |v| format!("safety {v} ms"),
    },
    Knob {
        key: "commit",
        get: |s| s.commit_bits,
        set: |s, v| s.commit_bits = v,
        say: |v| format!("commit bits {v:#x}"),
    },
    Knob {
        key: "static",
        get: |s| s.static_members,
        set: |s, v| s.static_members = v.min(1),
        say: |v| {
            (if v == 1 {
                "static members"
            } else {
                "dynamic members"
            })
            .to_owned()
        },
    },
];

impl fmt::Display for GroupPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let knobs: Vec<String> = KNOBS
            .iter()
            .map(|k| (k.say)((k.get)(&self.scenario)))
            .collect();
        writeln!(f, "group seed {}: {}", self.seed, knobs.join(", "))?;
        for e in &self.events {
            writeln!(f, "  at {:>6} ms: {:?}", e.at_ms, e.event)?;
        }
        write!(f, "  replay: STELLFLOW_GROUP_PLAN='{}'", self.to_code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_round_trips() {
        for seed in 0..200 {
            let plan = GroupPlan::from_seed(seed);
            assert_eq!(GroupPlan::parse(&plan.to_code()), Some(plan));
            let plan = GroupPlan::static_from_seed(seed);
            assert_eq!(GroupPlan::parse(&plan.to_code()), Some(plan));
        }
    }

    #[test]
    fn a_replayed_plan_is_held_to_the_bounds_and_unknown_keys_are_refused() {
        let plan = GroupPlan::parse("seed=3;b=0;p=999;m=77;session=1;hb=0;commit=5").unwrap();
        let s = plan.scenario;
        assert_eq!(
            (
                s.brokers,
                s.partitions,
                s.members,
                s.session_ms,
                s.heartbeat_ms
            ),
            (1, 64, MAX_MEMBERS as u32, 100, 10)
        );
        assert_eq!(s.commit_bits, 5);
        assert!(plan.to_string().contains("commit bits 0x5"));
        assert_eq!(GroupPlan::parse("seed=3;nope=1"), None);
        assert_eq!(GroupPlan::parse("seed=3;b=x"), None);
    }
}
