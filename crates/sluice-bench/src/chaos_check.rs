//! What a chaos round finds: one [`Check`] per invariant, pass or fail with its figures.

use std::time::Duration;

/// One invariant of one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Scenario (and variant) name.
    pub scenario: String,
    /// Round, from 1.
    pub round: u32,
    /// What must hold.
    pub invariant: &'static str,
    /// Whether it held.
    pub pass: bool,
    /// The figures it was judged on.
    pub figures: String,
}

impl Check {
    /// A check of `invariant` in `scenario`'s `round`.
    #[must_use]
    pub fn new(scenario: &str, round: u32, invariant: &'static str, pass: bool, figures: String) -> Self {
        Self { scenario: scenario.to_owned(), round, invariant, pass, figures }
    }
}

/// Milliseconds of a duration, for the figures.
#[must_use]
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}
