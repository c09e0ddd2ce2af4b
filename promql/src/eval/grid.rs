//! The evaluation timestamps of a query or sub-expression.

/// The evaluation timestamps: `start, start+step, ..., <= end` (ms). `step >= 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    pub start: i64,
    pub end: i64,
    pub step: i64,
}

impl Grid {
    /// Number of evaluation steps.
    pub fn len(&self) -> usize {
        if self.end < self.start { 0 } else { (self.end.saturating_sub(self.start) / self.step) as usize + 1 }
    }

    /// Timestamp of step `i`.
    pub fn ts(&self, i: usize) -> i64 {
        self.start + i as i64 * self.step
    }

    /// Step index of timestamp `t` (which must be on the grid).
    pub fn index(&self, t: i64) -> usize {
        ((t - self.start) / self.step) as usize
    }

    /// A single evaluation (instant query, or a step-invariant part).
    pub fn is_instant(&self) -> bool {
        self.start == self.end
    }

    /// Iterates over all step timestamps.
    pub fn timestamps(&self) -> impl Iterator<Item = i64> + use<> {
        let g = *self;
        (0..g.len()).map(move |i| g.ts(i))
    }
}
