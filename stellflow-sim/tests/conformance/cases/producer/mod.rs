//! Producer cases (PROTOCOL.md §3.12, §3.3.2, §3.13, §4.2): producer ids, SRFB validation,
//! idempotence and transactions, gathered in run order.

mod idempotence;
mod ids;
mod srfb;
mod support;
mod transactions;

use crate::conformance::Case;

pub fn cases() -> Vec<Case> {
    let mut v = ids::cases();
    v.extend(srfb::cases());
    v.extend(idempotence::cases());
    v.extend(transactions::cases());
    v
}
