//! Manual DMA in the interpreter, with Pallas interpret-mode style race detection: a copy
//! moves its elements when it starts (the CPU forms do the same), and until its wait the
//! destination window may not be read or written and the source window may not be written.
//! A wait must match a started copy (same refs, windows and semaphore); a second wait, a
//! wait on a copy never started, and a copy never waited for by the end of the grid are
//! errors at the user's line. A copy may stay in flight across grid steps (prefetching the
//! next step's data, as Pallas kernels do) only between scratch buffers and HBM refs: the
//! pipelined blocks of the other operands are swapped between steps, so a copy into or out
//! of one must be waited for in its own step.

use super::error::InterpError;
use crate::ir::Loc;

/// One copy, resolved: buffer indices and element windows.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Transfer {
    pub src: usize,
    pub src_starts: Vec<usize>,
    pub dst: usize,
    pub dst_starts: Vec<usize>,
    pub sizes: Vec<usize>,
    /// Semaphore array buffer and the index in it.
    pub sem: (usize, usize),
}

/// Copies in flight and copies already waited for, in this grid step.
#[derive(Default)]
pub(crate) struct DmaState {
    in_flight: Vec<(Transfer, Loc)>,
    waited: Vec<(Transfer, Loc)>,
}

fn race(message: String, loc: Loc) -> InterpError {
    InterpError::Dma { message, loc }
}

fn overlaps(a_starts: &[usize], b_starts: &[usize], a_sizes: &[usize], b_sizes: &[usize]) -> bool {
    a_starts
        .iter()
        .zip(b_starts)
        .zip(a_sizes.iter().zip(b_sizes))
        .all(|((&a, &b), (&na, &nb))| a < b + nb && b < a + na)
}

impl DmaState {
    /// Checks that `t` may start now (the caller then moves the data and calls `started`).
    pub fn start(&self, t: &Transfer, loc: Loc) -> Result<(), InterpError> {
        if let Some((_, at)) = self.in_flight.iter().find(|(p, _)| p.sem == t.sem) {
            return Err(race(
                format!(
                    "semaphore #{} already has a copy in flight (started at {at}); wait for it \
                     before reusing the semaphore",
                    t.sem.1
                ),
                loc,
            ));
        }
        self.check_write(t.dst, &t.dst_starts, &t.sizes, "start a DMA into", loc)
    }

    /// Records `t` as in flight.
    pub fn started(&mut self, t: Transfer, loc: Loc) {
        self.waited.retain(|(w, _)| *w != t);
        self.in_flight.push((t, loc));
    }

    pub fn wait(&mut self, t: &Transfer, loc: Loc) -> Result<(), InterpError> {
        if let Some(i) = self.in_flight.iter().position(|(p, _)| p == t) {
            let done = self.in_flight.remove(i);
            self.waited.push(done);
            return Ok(());
        }
        if let Some((_, at)) = self.waited.iter().find(|(w, _)| w == t) {
            return Err(race(
                format!("waits twice on the DMA started at {at}: it was already waited for"),
                loc,
            ));
        }
        if let Some((_, at)) = self.in_flight.iter().find(|(p, _)| p.sem == t.sem) {
            return Err(race(
                format!(
                    "waits on semaphore #{} for a copy other than the one in flight on it \
                     (started at {at}): a wait names the same refs, windows and semaphore as \
                     its start",
                    t.sem.1
                ),
                loc,
            ));
        }
        Err(race(
            format!(
                "waits on a DMA that was never started (semaphore #{} has no copy in flight)",
                t.sem.1
            ),
            loc,
        ))
    }

    /// A read of `buf[starts ..][..sizes]`: not of a copy's destination before its wait.
    pub fn check_read(
        &self,
        buf: usize,
        starts: &[usize],
        sizes: &[usize],
        loc: Loc,
    ) -> Result<(), InterpError> {
        for (p, at) in &self.in_flight {
            if p.dst == buf && overlaps(&p.dst_starts, starts, &p.sizes, sizes) {
                return Err(race(
                    format!(
                        "reads the destination of the DMA started at {at} before waiting for \
                         it (call `.wait()` first)"
                    ),
                    loc,
                ));
            }
        }
        Ok(())
    }

    /// A write of `buf[starts ..][..sizes]`: not of a copy's source or destination in flight.
    pub fn check_write(
        &self,
        buf: usize,
        starts: &[usize],
        sizes: &[usize],
        what: &str,
        loc: Loc,
    ) -> Result<(), InterpError> {
        for (p, at) in &self.in_flight {
            let hits = |b: usize, s: &[usize]| b == buf && overlaps(s, starts, &p.sizes, sizes);
            if hits(p.dst, &p.dst_starts) || hits(p.src, &p.src_starts) {
                return Err(race(
                    format!(
                        "would {what} a window of the DMA started at {at} while it is in flight \
                         (wait for it first)"
                    ),
                    loc,
                ));
            }
        }
        Ok(())
    }

    /// At the end of a grid step: no copy in flight touches a pipelined block (`pipelined`
    /// says which buffers are).
    pub fn end_step(&self, pipelined: impl Fn(usize) -> bool) -> Result<(), InterpError> {
        match self
            .in_flight
            .iter()
            .find(|(t, _)| pipelined(t.src) || pipelined(t.dst))
        {
            None => Ok(()),
            Some((_, at)) => Err(race(
                "this DMA into or out of a pipelined block is still in flight at the end of its \
                 grid step: wait for it in the same step (only copies between scratch buffers \
                 and HBM refs may stay in flight across steps)"
                    .into(),
                *at,
            )),
        }
    }

    /// At the end of a `run_scoped` region: no copy in flight touches its buffers
    /// (`scoped` says which are), which are freed now.
    pub fn end_scope(
        &mut self,
        scoped: impl Fn(usize) -> bool,
        loc: Loc,
    ) -> Result<(), InterpError> {
        let uses = |t: &Transfer| scoped(t.src) || scoped(t.dst) || scoped(t.sem.0);
        if let Some((_, at)) = self.in_flight.iter().find(|(t, _)| uses(t)) {
            return Err(race(
                format!(
                    "the DMA started at {at} uses scoped scratch and is still in flight when the \
                     `run_scoped` region ends; wait for it inside the region"
                ),
                loc,
            ));
        }
        // Their indices are reused by the next scope.
        self.waited.retain(|(t, _)| !uses(t));
        Ok(())
    }

    /// At the end of the grid every copy has been waited for.
    pub fn finish(&self) -> Result<(), InterpError> {
        match self.in_flight.first() {
            None => Ok(()),
            Some((_, at)) => Err(race(
                "this DMA is never waited for: every started copy needs a `.wait()` before \
                 the kernel ends"
                    .into(),
                *at,
            )),
        }
    }
}
