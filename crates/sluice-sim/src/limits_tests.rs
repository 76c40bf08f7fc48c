use super::*;

const MINUTE: f64 = 60.0;

fn rule() -> Option<WindowRule> {
    Some(WindowRule { len: 1.0, fraction: 0.1, quantized: false })
}

fn quantized(len: f64) -> Option<WindowRule> {
    Some(WindowRule { len, fraction: 1.0, quantized: true })
}

#[test]
fn bucket_refills_continuously_up_to_capacity() {
    let mut b = Bucket::full(60.0, MINUTE, 0.0);
    b.take(0.0, 60.0);
    assert!((b.level(0.0)).abs() < 1e-9);
    assert!((b.level(30.0) - 30.0).abs() < 1e-9);
    assert!((b.level(600.0) - 60.0).abs() < 1e-9);
}

#[test]
fn bucket_wait_is_time_to_refill_the_missing_part() {
    let mut b = Bucket::full(60.0, MINUTE, 0.0);
    b.take(0.0, 59.0);
    assert_eq!(b.wait_for(0.0, 1.0), Some(0.0));
    assert!((b.wait_for(0.0, 3.0).unwrap() - 2.0).abs() < 1e-9);
    assert_eq!(b.wait_for(0.0, 61.0), None);
}

#[test]
fn bucket_debt_and_refund() {
    let mut b = Bucket::full(10.0, 10.0, 0.0);
    b.take(0.0, 15.0);
    assert!((b.level(0.0) + 5.0).abs() < 1e-9);
    assert!((b.time_to_full(0.0) - 15.0).abs() < 1e-9);
    b.refund(0.0, 100.0);
    assert!((b.level(0.0) - 10.0).abs() < 1e-9);
}

#[test]
fn clamped_take_never_goes_negative() {
    let mut b = Bucket::full(2.0, MINUTE, 0.0);
    b.take_clamped(0.0, 1.5);
    b.take_clamped(0.0, 1.5);
    assert!(b.level(0.0).abs() < 1e-9);
}

#[test]
fn capacity_change_keeps_usage() {
    let mut b = Bucket::full(100.0, MINUTE, 0.0);
    b.take(0.0, 40.0);
    b.set_capacity(0.0, 200.0, MINUTE);
    assert!((b.level(0.0) - 160.0).abs() < 1e-9);
    b.set_capacity(0.0, 10.0, MINUTE);
    assert!((b.level(0.0) + 30.0).abs() < 1e-9);
}

#[test]
fn window_sums_recent_costs_and_forgets_old_ones() {
    let mut w = Window::new(1.0);
    w.add(0.0, 3.0);
    w.add(0.5, 2.0);
    assert!((w.sum(0.9) - 5.0).abs() < 1e-9);
    assert!((w.sum(1.2) - 2.0).abs() < 1e-9);
    assert!(w.sum(1.6).abs() < 1e-9);
}

#[test]
fn window_wait_is_until_enough_slots_expire() {
    let mut w = Window::new(1.0);
    w.add(0.0, 5.0);
    w.add(0.5, 5.0);
    assert!(w.wait_for(0.6, 1.0, 10.0) > 0.0);
    let wait = w.wait_for(0.6, 1.0, 10.0);
    // The first slot (0.00..0.05) expires at 1.0.
    assert!((wait - 0.4).abs() < 1e-9, "{wait}");
    // Needing both slots gone: the second expires at 1.5.
    assert!((w.wait_for(0.6, 6.0, 10.0) - 0.9).abs() < 1e-9);
    assert!(w.wait_for(1.6, 6.0, 10.0).abs() < 1e-9);
}

#[test]
fn window_admits_a_big_request_when_empty() {
    let mut w = Window::new(1.0);
    assert!(w.wait_for(0.0, 50.0, 10.0).abs() < 1e-9);
    w.add(0.0, 50.0);
    assert!(w.wait_for(0.1, 1.0, 10.0) > 0.0);
}

#[test]
fn meter_paced_at_99_percent_never_waits() {
    let mut m = Meter::new(600.0, MINUTE, rule(), 0.0);
    let step = MINUTE / (600.0 * 0.99);
    let mut now = 0.0;
    while now < 5.0 * MINUTE {
        assert_eq!(m.wait_for(now, 1.0), Wait::Now, "at {now}");
        m.take(now, 1.0);
        now += step;
    }
}

#[test]
fn meter_burst_of_a_minute_budget_is_cut_by_the_window() {
    let mut m = Meter::new(600.0, MINUTE, rule(), 0.0);
    let mut admitted = 0;
    for i in 0..600 {
        let now = f64::from(i) / 600.0;
        if m.wait_for(now, 1.0) == Wait::Now {
            m.take(now, 1.0);
            admitted += 1;
        }
    }
    // 10 % of the minute per 1 s window, plus refill: far below the 600 a minute bucket allows.
    assert!((60..=80).contains(&admitted), "{admitted}");
}

#[test]
fn meter_rejects_what_can_never_fit() {
    let mut m = Meter::new(100.0, MINUTE, rule(), 0.0);
    assert_eq!(m.wait_for(0.0, 101.0), Wait::Never);
    assert_eq!(m.wait_for(0.0, 100.0), Wait::Now);
}

#[test]
fn meter_wait_is_the_later_of_bucket_and_window() {
    let mut m = Meter::new(60.0, MINUTE, rule(), 0.0);
    for _ in 0..6 {
        m.take(0.0, 1.0);
    }
    match m.wait_for(0.0, 1.0) {
        Wait::After(s) => assert!((s - 1.0).abs() < 1e-9, "{s}"),
        other => panic!("{other:?}"),
    }
    let mut m = Meter::new(60.0, MINUTE, None, 0.0);
    m.take(0.0, 60.0);
    match m.wait_for(0.5, 1.0) {
        Wait::After(s) => assert!((s - 0.5).abs() < 1e-9, "{s}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn meter_status_reports_limit_remaining_and_reset() {
    let mut m = Meter::new(60.0, MINUTE, None, 0.0);
    m.take(0.0, 30.5);
    let (limit, remaining, reset) = m.status(0.0);
    assert!((limit - 60.0).abs() < 1e-9);
    assert!((remaining - 29.0).abs() < 1e-9);
    assert!((reset - 30.5).abs() < 1e-9);
}

#[test]
fn quantized_meter_admits_one_windows_worth_at_a_time() {
    // 600 RPM enforced per second: 10 at once, then one every 0.1 s.
    let mut m = Meter::new(600.0, MINUTE, quantized(1.0), 0.0);
    for _ in 0..10 {
        assert_eq!(m.wait_for(0.0, 1.0), Wait::Now);
        m.take(0.0, 1.0);
    }
    match m.wait_for(0.0, 1.0) {
        Wait::After(s) => assert!((s - 0.1).abs() < 1e-9, "{s}"),
        other => panic!("{other:?}"),
    }
    // Paced at 99 % of the minute's rate it never waits.
    let step = 0.1 / 0.99;
    let mut now = step;
    while now < 10.0 {
        assert_eq!(m.wait_for(now, 1.0), Wait::Now, "at {now}");
        m.take(now, 1.0);
        now += step;
    }
}

#[test]
fn quantized_meter_admits_an_oversize_cost_only_when_idle_and_leaves_debt() {
    // 300k TPM per second: 5,000 a window; a 5,030-token call is larger than that.
    let mut m = Meter::new(300_000.0, MINUTE, quantized(1.0), 0.0);
    assert_eq!(m.wait_for(0.0, 5_030.0), Wait::Now);
    m.take(0.0, 5_030.0);
    // A small one waits only for its own part: 30 in debt plus 100, less 50 refilled.
    match m.wait_for(0.01, 100.0) {
        Wait::After(s) => assert!((s - 0.016).abs() < 1e-6, "{s}"),
        other => panic!("{other:?}"),
    }
    // The next large one waits for the bucket to be full again: 5,030 / 5,000 s.
    match m.wait_for(0.5, 5_030.0) {
        Wait::After(s) => assert!((s - 0.506).abs() < 1e-6, "{s}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(m.wait_for(1.007, 5_030.0), Wait::Now);
}

#[test]
fn quantized_window_of_two_seconds_holds_two_seconds_worth() {
    let mut m = Meter::new(600.0, MINUTE, quantized(2.0), 0.0);
    let mut admitted = 0;
    while m.wait_for(0.0, 1.0) == Wait::Now {
        m.take(0.0, 1.0);
        admitted += 1;
    }
    assert_eq!(admitted, 20);
}

#[test]
fn quantized_window_keeps_its_debt_across_a_limit_change() {
    let mut m = Meter::new(600.0, MINUTE, quantized(1.0), 0.0);
    for _ in 0..10 {
        m.take(0.0, 1.0);
    }
    m.set_limit(0.0, 1_200.0, MINUTE, quantized(1.0));
    // 20 a window now, 10 of them used.
    let mut admitted = 0;
    while m.wait_for(0.0, 1.0) == Wait::Now {
        m.take(0.0, 1.0);
        admitted += 1;
    }
    assert_eq!(admitted, 10);
}
