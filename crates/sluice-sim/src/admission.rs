//! Per-model admission: every configured dimension checked, all debited or none.
//!
//! Pure: time is passed in as simulated seconds.

use serde::{Deserialize, Serialize};

use crate::config::{Limits, OutputAccounting, WindowKind};
use crate::limits::{Meter, Wait, WindowRule};

const MINUTE: f64 = 60.0;
const DAY: f64 = 86_400.0;

/// The class of limit a request was rejected on (the keys of `rate_limited` in stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
    /// Input tokens per minute.
    InputTokens,
    /// Output tokens per minute.
    OutputTokens,
    /// Requests in flight.
    Concurrency,
    /// Requests or tokens per day.
    Daily,
}

/// One metered dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// Requests per minute.
    Rpm,
    /// Tokens per minute.
    Tpm,
    /// Input tokens per minute.
    Itpm,
    /// Output tokens per minute.
    Otpm,
    /// Requests per day.
    Rpd,
    /// Tokens per day.
    Tpd,
}

const DIMS: [Dim; 6] = [Dim::Rpm, Dim::Tpm, Dim::Itpm, Dim::Otpm, Dim::Rpd, Dim::Tpd];

impl Dim {
    /// The stats class of this dimension.
    #[must_use]
    pub fn kind(self) -> LimitKind {
        match self {
            Self::Rpm => LimitKind::Requests,
            Self::Tpm => LimitKind::Tokens,
            Self::Itpm => LimitKind::InputTokens,
            Self::Otpm => LimitKind::OutputTokens,
            Self::Rpd | Self::Tpd => LimitKind::Daily,
        }
    }

    /// Whether this dimension counts tokens (else requests).
    #[must_use]
    pub fn is_tokens(self) -> bool {
        !matches!(self, Self::Rpm | Self::Rpd)
    }
}

/// What one request costs at admission.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// Against TPM (OpenAI shape).
    pub tokens: f64,
    /// Against ITPM (uncached input).
    pub input: f64,
    /// Against OTPM at admission (`max_tokens` mode only).
    pub output: f64,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rejection {
    /// The dimension that refused it.
    pub dim: Dim,
    /// Simulated seconds until it could pass; `None` when it never can.
    pub wait: Option<f64>,
    /// The dimension's limit.
    pub limit: f64,
    /// What the dimension had used.
    pub used: f64,
    /// What the request asked for on that dimension.
    pub requested: f64,
}

/// The meters of one model.
#[derive(Debug, Clone)]
pub struct ModelLimiter {
    meters: [Option<Meter>; 6],
    accounting: OutputAccounting,
    count_rejected: bool,
}

fn index(dim: Dim) -> usize {
    DIMS.iter().position(|d| *d == dim).unwrap_or(0)
}

#[expect(clippy::cast_precision_loss, reason = "limits are far below 2^52")]
fn limit_of(limits: &Limits, dim: Dim) -> Option<f64> {
    let v = match dim {
        Dim::Rpm => limits.rpm,
        Dim::Tpm => limits.tpm,
        Dim::Itpm => limits.itpm,
        Dim::Otpm => limits.otpm,
        Dim::Rpd => limits.rpd,
        Dim::Tpd => limits.tpd,
    };
    v.map(|v| v as f64)
}

fn shape_of(limits: &Limits, dim: Dim) -> (f64, Option<WindowRule>) {
    let quantized = limits.window_kind == WindowKind::Quantized;
    let rule = WindowRule { len: limits.window_ms / 1000.0, fraction: limits.window_fraction, quantized };
    match dim {
        Dim::Rpd | Dim::Tpd => (DAY, None),
        _ if !quantized && limits.window_fraction >= 1.0 => (MINUTE, None),
        _ => (MINUTE, Some(rule)),
    }
}

impl ModelLimiter {
    /// Full meters for `limits` at `now`.
    #[must_use]
    pub fn new(limits: &Limits, accounting: OutputAccounting, count_rejected: bool, now: f64) -> Self {
        let meters = DIMS.map(|dim| {
            let (period, rule) = shape_of(limits, dim);
            limit_of(limits, dim).map(|limit| Meter::new(limit, period, rule, now))
        });
        Self { meters, accounting, count_rejected }
    }

    fn cost_on(&self, dim: Dim, cost: &Cost) -> f64 {
        match dim {
            Dim::Rpm | Dim::Rpd => 1.0,
            Dim::Tpm => cost.tokens,
            Dim::Itpm => cost.input,
            Dim::Otpm => match self.accounting {
                OutputAccounting::Actual => 1.0,
                OutputAccounting::MaxTokens => cost.output,
            },
            Dim::Tpd => cost.tokens + cost.input + cost.output,
        }
    }

    fn debits_at_admission(&self, dim: Dim) -> bool {
        !(dim == Dim::Otpm && self.accounting == OutputAccounting::Actual)
    }

    /// Admits `cost` (debiting every dimension) or tells which dimension refuses it.
    ///
    /// # Errors
    /// The refusing dimension; with the longest wait when several refuse.
    pub fn admit(&mut self, now: f64, cost: &Cost) -> Result<(), Rejection> {
        let mut worst: Option<(Dim, Option<f64>)> = None;
        for dim in DIMS {
            let amount = self.cost_on(dim, cost);
            let Some(meter) = self.meters[index(dim)].as_mut() else { continue };
            let wait = match meter.wait_for(now, amount) {
                Wait::Now => continue,
                Wait::After(s) => Some(s),
                Wait::Never => None,
            };
            let longer = match worst {
                None => true,
                Some((_, Some(w))) => wait.is_none_or(|s| s > w),
                Some((_, None)) => false,
            };
            if longer {
                worst = Some((dim, wait));
            }
        }
        if let Some((dim, wait)) = worst {
            return Err(self.reject(now, dim, wait, cost));
        }
        for dim in DIMS {
            let amount = self.cost_on(dim, cost);
            if self.debits_at_admission(dim)
                && let Some(meter) = self.meters[index(dim)].as_mut()
            {
                meter.take(now, amount);
            }
        }
        Ok(())
    }

    /// Refuses `cost` on `dim`. When refusals use a request unit, the unit is charged and
    /// the wait then covers it too: the hint stays true, so a retry at the hinted time passes
    /// (absent other traffic) even though the refusal itself drew on the request budget.
    fn reject(&mut self, now: f64, dim: Dim, mut wait: Option<f64>, cost: &Cost) -> Rejection {
        let requested = self.cost_on(dim, cost);
        let (limit, remaining, _) = self.meters[index(dim)].as_mut().map_or((0.0, 0.0, 0.0), |m| m.status(now));
        if self.count_rejected
            && let Some(rpm) = self.meters[index(Dim::Rpm)].as_mut()
        {
            rpm.take_rejected(now, 1.0);
            if let (Some(w), Wait::After(again)) = (wait, rpm.wait_for(now, 1.0)) {
                wait = Some(w.max(again));
            }
        }
        Rejection { dim, wait, limit, used: limit - remaining, requested }
    }

    /// Settles output tokens after generation: debits the actual output (`actual` mode) or
    /// refunds what `max_tokens` over-reserved (`max_tokens` mode).
    pub fn settle_output(&mut self, now: f64, reserved: f64, actual: f64) {
        let accounting = self.accounting;
        let Some(meter) = self.meters[index(Dim::Otpm)].as_mut() else { return };
        match accounting {
            OutputAccounting::Actual => meter.take(now, actual),
            OutputAccounting::MaxTokens => meter.refund(now, (reserved - actual).max(0.0)),
        }
    }

    /// Settles TPM after generation (Bedrock): `reserved` was taken at admission, `actual`
    /// is what the answer burned; the difference is refunded or taken.
    pub fn settle_tokens(&mut self, now: f64, reserved: f64, actual: f64) {
        let Some(meter) = self.meters[index(Dim::Tpm)].as_mut() else { return };
        if actual > reserved {
            meter.take(now, actual - reserved);
        } else {
            meter.refund(now, reserved - actual);
        }
    }

    /// Limit, remaining and seconds to full of a dimension, if it is limited.
    pub fn status(&mut self, now: f64, dim: Dim) -> Option<(f64, f64, f64)> {
        self.meters[index(dim)].as_mut().map(|m| m.status(now))
    }

    /// Applies new limits, keeping what was used on dimensions that stay limited.
    pub fn set_limits(&mut self, now: f64, limits: &Limits) {
        for dim in DIMS {
            let (period, rule) = shape_of(limits, dim);
            let slot = &mut self.meters[index(dim)];
            *slot = match (slot.take(), limit_of(limits, dim)) {
                (_, None) => None,
                (Some(mut meter), Some(limit)) => {
                    meter.set_limit(now, limit, period, rule);
                    Some(meter)
                }
                (None, Some(limit)) => Some(Meter::new(limit, period, rule, now)),
            };
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
