use super::*;

fn limits(rpm: Option<u64>, tpm: Option<u64>) -> Limits {
    Limits { rpm, tpm, ..Limits::default() }
}

fn tokens(n: f64) -> Cost {
    Cost { tokens: n, ..Cost::default() }
}

#[test]
fn rpm_bound_workload_is_rejected_on_requests() {
    let mut l = ModelLimiter::new(&limits(Some(60), Some(1_000_000)), OutputAccounting::Actual, true, 0.0);
    let results: Vec<_> = (0..10).map(|_| l.admit(0.0, &tokens(10.0))).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 6);
    let rejection = results.iter().find_map(|r| r.err()).unwrap();
    assert_eq!(rejection.dim, Dim::Rpm);
    assert_eq!(rejection.dim.kind(), LimitKind::Requests);
    assert!(rejection.wait.unwrap() > 0.0);
}

#[test]
fn tpm_bound_workload_is_rejected_on_tokens() {
    let mut l = ModelLimiter::new(&limits(Some(10_000), Some(1000)), OutputAccounting::Actual, true, 0.0);
    assert!(l.admit(0.0, &tokens(200.0)).is_ok());
    let rejection = l.admit(0.0, &tokens(200.0)).unwrap_err();
    assert_eq!(rejection.dim, Dim::Tpm);
    assert!((rejection.requested - 200.0).abs() < 1e-9);
    assert!((rejection.used - 200.0).abs() < 1e-9);
}

#[test]
fn rejected_requests_use_a_request_unit_when_configured() {
    let mut counted = ModelLimiter::new(&limits(Some(100), Some(100)), OutputAccounting::Actual, true, 0.0);
    let mut free = ModelLimiter::new(&limits(Some(100), Some(100)), OutputAccounting::Actual, false, 0.0);
    for l in [&mut counted, &mut free] {
        assert!(l.admit(0.0, &tokens(101.0)).is_err());
    }
    assert_eq!(counted.status(0.0, Dim::Rpm).unwrap().1, 99.0);
    assert_eq!(free.status(0.0, Dim::Rpm).unwrap().1, 100.0);
}

#[test]
fn a_counted_refusal_hints_a_wait_that_covers_its_own_request_unit() {
    // 60 RPM refills one request a second. Half a request is left when the refusal comes;
    // charging the refused request empties the bucket, so the next one fits only after a
    // whole second, and the hint must say so (it said 0.5 s, and a retry then failed).
    let lim = Limits { window_fraction: 1.0, ..limits(Some(60), None) };
    let mut l = ModelLimiter::new(&lim, OutputAccounting::Actual, true, 0.0);
    for _ in 0..60 {
        assert!(l.admit(0.0, &tokens(1.0)).is_ok());
    }
    let rejection = l.admit(0.5, &tokens(1.0)).unwrap_err();
    assert_eq!(rejection.dim, Dim::Rpm);
    let wait = rejection.wait.unwrap();
    assert!((wait - 1.0).abs() < 1e-6, "hinted {wait}");
    assert!(l.admit(0.5 + wait + 1e-6, &tokens(1.0)).is_ok());
}

#[test]
fn too_large_requests_never_pass() {
    let mut l = ModelLimiter::new(&limits(None, Some(1000)), OutputAccounting::Actual, true, 0.0);
    let rejection = l.admit(0.0, &tokens(1001.0)).unwrap_err();
    assert_eq!(rejection.wait, None);
}

#[test]
fn anthropic_actual_output_is_charged_after_generation() {
    let lim = Limits { otpm: Some(600), itpm: Some(100_000), ..Limits::default() };
    let mut l = ModelLimiter::new(&lim, OutputAccounting::Actual, false, 0.0);
    let cost = Cost { input: 10.0, output: 0.0, tokens: 0.0 };
    assert!(l.admit(0.0, &cost).is_ok());
    l.settle_output(0.0, 0.0, 700.0);
    let rejection = l.admit(0.0, &cost).unwrap_err();
    assert_eq!(rejection.dim, Dim::Otpm);
    // 100 tokens of debt plus one token: (101 / 600) minutes.
    assert!((rejection.wait.unwrap() - 101.0 / 10.0).abs() < 1e-6);
    assert!(l.admit(10.2, &cost).is_ok());
}

#[test]
fn anthropic_max_tokens_mode_reserves_and_refunds() {
    let lim = Limits { otpm: Some(1000), window_fraction: 1.0, ..Limits::default() };
    let mut l = ModelLimiter::new(&lim, OutputAccounting::MaxTokens, false, 0.0);
    assert!(l.admit(0.0, &Cost { output: 800.0, ..Cost::default() }).is_ok());
    assert_eq!(l.admit(0.0, &Cost { output: 800.0, ..Cost::default() }).unwrap_err().dim, Dim::Otpm);
    l.settle_output(0.0, 800.0, 100.0);
    assert_eq!(l.status(0.0, Dim::Otpm).unwrap().1, 900.0);
}

#[test]
fn bedrock_tpm_settles_to_the_weighted_output_taking_or_refunding_the_difference() {
    let lim = Limits { tpm: Some(10_000), window_fraction: 1.0, ..Limits::default() };
    let mut l = ModelLimiter::new(&lim, OutputAccounting::MaxTokens, false, 0.0);
    // Input 100 + max_tokens 1,000 up front.
    assert!(l.admit(0.0, &tokens(1_100.0)).is_ok());
    // 600 output tokens × 5 burned: 2,000 more than the 1,000 reserved.
    l.settle_tokens(0.0, 1_000.0, 3_000.0);
    assert_eq!(l.status(0.0, Dim::Tpm).unwrap().1, 6_900.0);
    // 100 output tokens × 5: half the reservation comes back.
    assert!(l.admit(0.0, &tokens(1_100.0)).is_ok());
    l.settle_tokens(0.0, 1_000.0, 500.0);
    assert_eq!(l.status(0.0, Dim::Tpm).unwrap().1, 6_300.0);
}

#[test]
fn daily_limits_are_their_own_kind() {
    let lim = Limits { rpd: Some(2), ..Limits::default() };
    let mut l = ModelLimiter::new(&lim, OutputAccounting::Actual, true, 0.0);
    assert!(l.admit(0.0, &tokens(1.0)).is_ok());
    assert!(l.admit(100.0, &tokens(1.0)).is_ok());
    let rejection = l.admit(200.0, &tokens(1.0)).unwrap_err();
    assert_eq!(rejection.dim.kind(), LimitKind::Daily);
}

#[test]
fn limit_changes_apply_at_runtime() {
    let mut l = ModelLimiter::new(&limits(Some(10), None), OutputAccounting::Actual, true, 0.0);
    for _ in 0..1 {
        assert!(l.admit(0.0, &tokens(0.0)).is_ok());
    }
    l.set_limits(0.0, &limits(Some(1000), Some(50)));
    assert_eq!(l.status(0.0, Dim::Rpm).unwrap(), (1000.0, 999.0, 0.06));
    assert_eq!(l.admit(0.0, &tokens(60.0)).unwrap_err().dim, Dim::Tpm);
    l.set_limits(0.0, &limits(None, None));
    assert!(l.status(0.0, Dim::Rpm).is_none());
    assert!(l.admit(0.0, &tokens(1e9)).is_ok());
}
