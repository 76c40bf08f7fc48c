//! Invariants of the adaptive controller on a fake timeline.

use std::time::Duration;

use proptest::prelude::*;
use sluice_adapt::{Aimd, AimdSettings, Controller, ControllerSettings, RampSettings};
use sluice_quota::{Cost, Dimension, Limits, Nanos, RateLimit};

fn limits() -> Limits {
    Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap_or_else(|| unreachable!()))
        .with_rate(RateLimit::per_minute(Dimension::Requests, 600).unwrap_or_else(|| unreachable!()))
}

fn settings() -> impl Strategy<Value = AimdSettings> {
    (0.05f64..0.99, 1u64..5_000, 1u64..120_000, 0.01f64..1.0).prop_map(|(decrease, interval, recovery, floor)| {
        AimdSettings {
            decrease,
            min_interval: Duration::from_millis(interval),
            recovery: Duration::from_millis(recovery),
            floor,
        }
    })
}

proptest! {
    /// Whatever the 429s and their timing, the factor stays in [floor, 1].
    #[test]
    fn the_factor_stays_in_its_range(settings in settings(), steps in prop::collection::vec((0u64..3_000_000_000, any::<bool>()), 1..300)) {
        let mut aimd = Aimd::new(settings, Nanos(0));
        let mut now = 0u64;
        for (dt, rejected) in steps {
            now += dt;
            if rejected {
                aimd.on_rejection(Nanos(now));
            }
            let f = aimd.factor(Nanos(now));
            prop_assert!(f >= settings.floor.clamp(0.01, 1.0) - 1e-12 && f <= 1.0, "factor {f}");
        }
    }

    /// Without 429s, recovery never goes down, and it reaches 1 within `recovery`.
    #[test]
    fn recovery_is_monotone_without_429s(settings in settings(), rejections in 1usize..10, probes in prop::collection::vec(0u64..2_000_000_000, 1..100)) {
        let mut aimd = Aimd::new(settings, Nanos(0));
        let mut now = 0u64;
        for _ in 0..rejections {
            now += 5_000_000_000;
            aimd.on_rejection(Nanos(now));
        }
        let mut last = aimd.factor(Nanos(now));
        for dt in probes {
            now += dt;
            let f = aimd.factor(Nanos(now));
            prop_assert!(f >= last, "{f} < {last}");
            last = f;
        }
        let full = now + u64::try_from(settings.recovery.as_nanos()).unwrap_or(u64::MAX);
        prop_assert_eq!(aimd.factor(Nanos(full)), 1.0);
    }

    /// The limits a controller asks for never exceed configuration (without adopt mode)
    /// and never drop below one unit per rate.
    #[test]
    fn applied_limits_stay_within_configuration(
        steps in prop::collection::vec((0u64..500_000_000, any::<bool>(), 0u64..5_000, 0u64..200_000), 1..200),
        ramp in any::<bool>(),
    ) {
        let ramp = ramp.then_some(RampSettings { slope: 0.05, window: RampSettings::WINDOW });
        let settings = ControllerSettings { ramp, ..ControllerSettings::default() };
        let configured = limits();
        let mut c = Controller::new(configured.clone(), settings, Nanos(0));
        let mut now = 0u64;
        for (dt, rejected, tokens, reported) in steps {
            now += dt;
            let windows = [sluice_adapt::ProviderWindow {
                dimension: Dimension::TotalTokens,
                limit: Some(reported.max(1)),
                remaining: Some(reported / 2),
                reset: None,
            }];
            let mut applied = c.on_response(Nanos(now), &windows, rejected).apply;
            applied = c.on_admitted(Nanos(now), Cost::request(tokens, 0)).or(applied);
            let effective = c.effective(Nanos(now));
            for limits in applied.iter().chain([&effective]) {
                for (rate, config) in limits.rates.iter().zip(&configured.rates) {
                    prop_assert!(rate.amount <= config.amount && rate.burst <= config.burst);
                }
            }
        }
    }
}

proptest! {
    /// The sketch's quantile is never below the exact quantile and within the bucket
    /// error above it.
    #[test]
    fn the_sketch_bounds_the_exact_quantile(values in prop::collection::vec(1u64..1_000_000, 20..2_000), q in 0.5f64..0.99) {
        let mut sketch = sluice_adapt::QuantileSketch::new(u64::MAX);
        for v in &values {
            sketch.observe(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        let exact = sorted[rank];
        let estimate = sketch.quantile(q).unwrap_or_default();
        prop_assert!(estimate as f64 >= exact as f64 / sluice_adapt::quantile::GAMMA, "{estimate} vs {exact}");
        prop_assert!(estimate as f64 <= exact as f64 * sluice_adapt::quantile::GAMMA + 1.0, "{estimate} vs {exact}");
    }

    /// An output reservation never exceeds `max_tokens`.
    #[test]
    fn reservations_never_exceed_max_tokens(observed in prop::collection::vec(0u64..100_000, 0..300), max_tokens in 0u64..50_000) {
        let mut e = sluice_adapt::OutputEstimator::new(sluice_adapt::OutputEstimate::P95 { warmup: 10 });
        for v in observed {
            e.observe(v);
            prop_assert!(e.reservation(max_tokens) <= max_tokens);
        }
    }
}
