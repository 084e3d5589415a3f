//! The root's aggregate payload budget (seed 002 §8): every envelope in a
//! root's call tree reserves one Flow ceiling from it before it starts and
//! gives it back only when its cleanup is confirmed (the [`Reservation`] is
//! dropped after `Contained::cleanup`). The kernel enforces the same
//! aggregate on the host cgroup; this accounting refuses the sixth
//! envelope up front with a stable code instead of letting it fail inside.

use std::sync::{Arc, Mutex};

use super::cgroup::{
    Limits, FLOW_CPU_QUOTA_US, FLOW_MEMORY_BYTES, FLOW_TASKS, ROOT_CPU_QUOTA_US, ROOT_MEMORY_BYTES,
    ROOT_TASKS,
};

/// How many Flow envelopes the root budget holds at once (seed: "at most 5").
pub const MAX_ENVELOPES: usize = {
    let by_memory = ROOT_MEMORY_BYTES / FLOW_MEMORY_BYTES;
    let by_tasks = ROOT_TASKS / FLOW_TASKS;
    let by_cpu = ROOT_CPU_QUOTA_US / FLOW_CPU_QUOTA_US;
    let mut n = by_memory;
    if by_tasks < n {
        n = by_tasks;
    }
    if by_cpu < n {
        n = by_cpu;
    }
    n as usize
};

/// The code a refused reservation carries.
pub const RESOURCE_EXHAUSTED: &str = "RESOURCE_EXHAUSTED";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: the root's payload budget is exhausted ({held} of {MAX_ENVELOPES} envelopes held; {memory_left} bytes, {tasks_left} tasks, {cpu_left_us} us CPU per period left)")]
pub struct Exhausted {
    pub code: &'static str,
    pub held: usize,
    pub memory_left: u64,
    pub tasks_left: u64,
    pub cpu_left_us: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Left {
    memory: u64,
    tasks: u64,
    cpu_us: u64,
    held: usize,
}

/// One root's aggregate budget; clones share it.
#[derive(Debug, Clone)]
pub struct Budget {
    left: Arc<Mutex<Left>>,
}

/// One envelope's share of the root budget, returned on drop.
#[derive(Debug)]
pub struct Reservation {
    left: Arc<Mutex<Left>>,
    limits: Limits,
}

impl Budget {
    /// A fresh root budget: 1,280 MiB, 448 tasks, 2.5 CPUs.
    pub fn root() -> Budget {
        Budget {
            left: Arc::new(Mutex::new(Left {
                memory: ROOT_MEMORY_BYTES,
                tasks: ROOT_TASKS,
                cpu_us: ROOT_CPU_QUOTA_US,
                held: 0,
            })),
        }
    }

    /// Reserve one Flow envelope's ceiling, or `RESOURCE_EXHAUSTED`.
    pub fn reserve(&self) -> Result<Reservation, crate::Error> {
        self.reserve_limits(Limits::FLOW)
    }

    /// Reserve one envelope of the given ceiling (a builtin effect's own
    /// envelope reserves its ceiling, docs/src/containment.md), or `RESOURCE_EXHAUSTED`.
    pub fn reserve_limits(&self, limits: Limits) -> Result<Reservation, crate::Error> {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        if left.memory < limits.memory_bytes
            || left.tasks < limits.tasks
            || left.cpu_us < limits.cpu_quota_us
        {
            return Err(crate::Error::Exhausted(Exhausted {
                code: RESOURCE_EXHAUSTED,
                held: left.held,
                memory_left: left.memory,
                tasks_left: left.tasks,
                cpu_left_us: left.cpu_us,
            }));
        }
        left.memory -= limits.memory_bytes;
        left.tasks -= limits.tasks;
        left.cpu_us -= limits.cpu_quota_us;
        left.held += 1;
        Ok(Reservation {
            left: self.left.clone(),
            limits,
        })
    }

    /// Envelopes currently holding a reservation.
    pub fn held(&self) -> usize {
        self.left.lock().unwrap_or_else(|e| e.into_inner()).held
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        left.memory += self.limits.memory_bytes;
        left.tasks += self.limits.tasks;
        left.cpu_us += self.limits.cpu_quota_us;
        left.held -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_budget_holds_exactly_five_envelopes() {
        assert_eq!(MAX_ENVELOPES, 5);
        let budget = Budget::root();
        let held: Vec<Reservation> = (0..MAX_ENVELOPES)
            .map(|_| budget.reserve().expect("within the budget"))
            .collect();
        assert_eq!(budget.held(), MAX_ENVELOPES);
        let past = budget.reserve().expect_err("one past the budget");
        assert_eq!(past.code(), "RESOURCE_EXHAUSTED");
        let crate::Error::Exhausted(past) = past else {
            panic!("{past:?}")
        };
        assert_eq!(past.code, "RESOURCE_EXHAUSTED");
        assert_eq!(past.held, 5);
        assert_eq!(past.memory_left, 0);
        assert_eq!(past.tasks_left, 448 - 5 * 64);
        assert!(past.to_string().starts_with("RESOURCE_EXHAUSTED: "));
        drop(held);
        assert_eq!(budget.held(), 0);
        let again: Vec<Reservation> = (0..5).map(|_| budget.reserve().unwrap()).collect();
        assert_eq!(again.len(), 5);
    }

    #[test]
    fn a_released_reservation_is_usable_again_and_clones_share() {
        let budget = Budget::root();
        let other = budget.clone();
        let mut held: Vec<Reservation> = (0..5).map(|_| other.reserve().unwrap()).collect();
        assert!(budget.reserve().is_err());
        held.pop();
        let one = budget.reserve().expect("the released share");
        assert!(budget.reserve().is_err());
        drop(one);
        assert_eq!(budget.held(), 4);
    }
}
