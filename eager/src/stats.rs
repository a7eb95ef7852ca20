//! Counters per mode, kept per thread (so a test or a bench sees its own work):
//! [`stats`] reads them, [`reset_stats`] zeroes them.

use crate::mode::EagerMode;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Why a deferred graph ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlushReason {
    /// `sync()`.
    Explicit,
    /// A host read (`to_host`, `item`, `Display`).
    HostRead,
    /// The graph reached its size limit.
    SizeLimit,
    /// A materialization rule cut the graph after an op that is slow fused on this device
    /// (transcendental elementwise ops on XLA CPU).
    SlowFused,
    /// An op that cannot be deferred (data-dependent shape, a mode switch) needed a value.
    NeedsValue,
    /// A compiled function's trace or replay.
    Compiled,
}

/// What one mode did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModeStats {
    /// Op calls issued (in DeferAndFuse: recorded).
    pub ops: u64,
    /// Programs launched on the device.
    pub launches: u64,
    /// Programs compiled (op programs and fused programs).
    pub compiles: u64,
    /// Lowering-cache and fused-program cache hits.
    pub cache_hits: u64,
    pub bytes_to_device: u64,
    pub bytes_to_host: u64,
    /// Input buffers a fused program took over for a result ([`crate::donation`]).
    pub donated: u64,
    pub flushes: BTreeMap<FlushReason, u64>,
    /// Time spent inside PJRT's execute call (the rest of an op call is host overhead).
    pub execute_nanos: u64,
}

impl ModeStats {
    pub fn flushes_total(&self) -> u64 {
        self.flushes.values().sum()
    }
}

/// Counters of every mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub modes: [ModeStats; 4],
}

impl Stats {
    pub fn mode(&self, m: EagerMode) -> &ModeStats {
        &self.modes[m.index()]
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for m in EagerMode::ALL {
            let s = self.mode(m);
            if *s == ModeStats::default() {
                continue;
            }
            write!(
                f,
                "eager {m}: {} op(s), {} launch(es), {} compile(s), {} cache hit(s), {} B to device, {} B to host",
                s.ops, s.launches, s.compiles, s.cache_hits, s.bytes_to_device, s.bytes_to_host
            )?;
            if s.donated > 0 {
                write!(f, ", {} buffer(s) donated", s.donated)?;
            }
            if !s.flushes.is_empty() {
                write!(f, ", flushes {:?}", s.flushes)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

thread_local! {
    static STATS: RefCell<Stats> = RefCell::new(Stats::default());
}

/// This thread's counters.
pub fn stats() -> Stats {
    STATS.with(|s| s.borrow().clone())
}

pub fn reset_stats() {
    STATS.with(|s| *s.borrow_mut() = Stats::default());
}

/// Updates the counters of mode `m`.
pub(crate) fn count(m: EagerMode, f: impl FnOnce(&mut ModeStats)) {
    STATS.with(|s| f(&mut s.borrow_mut().modes[m.index()]));
}
