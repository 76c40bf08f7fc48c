//! The usage query: parameters, grouping, ranges and the CSV's safety.

use super::dates::parse_instant;
use sluice_jobs::{UsageCounts, UsageKey};

use super::query::*;

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn day(y: i64, m: u32, d: u32) -> u32 {
    u32::try_from(parse_instant(&format!("{y:04}-{m:02}-{d:02}")).unwrap() / 86_400).unwrap()
}

fn key(day: u32, tenant: &str, team: &str, key: &str, deployment: &str) -> UsageKey {
    UsageKey {
        day,
        tenant: tenant.into(),
        team: team.into(),
        key: key.into(),
        profile: "fast".into(),
        deployment: deployment.into(),
    }
}

fn counts(requests: u64, input: u64, cost_nanos: u64) -> UsageCounts {
    UsageCounts { requests, input_tokens: input, output_tokens: 1, cost_nanos, ..UsageCounts::default() }
}

#[test]
fn ranges_are_days_from_inclusive_to_exclusive_with_defaults() {
    let today = day(2026, 12, 1);
    let q = parse(&params(&[("from", "2026-11-01"), ("to", "2026-12-01")]), today, false).unwrap();
    assert_eq!((q.first, q.last), (day(2026, 11, 1), day(2026, 11, 30)));
    // A time within a day covers that day.
    let q =
        parse(&params(&[("from", "2026-11-01T23:00:00-02:00"), ("to", "2026-11-03T00:00:01Z")]), today, false).unwrap();
    assert_eq!((q.first, q.last), (day(2026, 11, 2), day(2026, 11, 3)));
    let q = parse(&[], today, false).unwrap();
    assert_eq!((q.first, q.last), (day(2026, 11, 2), today), "the last 30 days, today included");
}

#[test]
fn invalid_parameters_are_named() {
    let today = day(2026, 12, 1);
    for (pairs, param) in [
        (vec![("from", "last week")], "from"),
        (vec![("to", "2026-02-30")], "to"),
        (vec![("from", "2026-11-02"), ("to", "2026-11-01")], "to"),
        (vec![("from", "2020-01-01"), ("to", "2026-01-01")], "from"),
        (vec![("group_by", "tenant,colour")], "group_by"),
        (vec![("format", "xlsx")], "format"),
        (vec![("limit", "5")], "limit"),
    ] {
        let err = parse(&params(&pairs), today, false).unwrap_err();
        assert_eq!(err.0, param, "{pairs:?}: {}", err.1);
    }
    let err = parse(&params(&[("from", "2020-01-01"), ("to", "2026-01-01")]), today, false).unwrap_err();
    assert!(err.1.contains("at most 366"), "{}", err.1);
}

#[test]
fn rows_are_grouped_as_asked_within_the_range_and_tenant() {
    let (d1, d2) = (day(2026, 11, 1), day(2026, 11, 2));
    let rollups = vec![
        (key(d1, "acme", "search", "k1", "oa"), counts(1, 10, 100)),
        (key(d1, "acme", "search", "k2", "oa"), counts(2, 20, 200)),
        (key(d2, "acme", "", "k3", "az"), counts(4, 40, 400)),
        (key(d2, "globex", "", "g1", "oa"), counts(8, 80, 800)),
        (key(d2 + 1, "acme", "", "k3", "az"), counts(16, 160, 1600)),
    ];
    let q =
        parse(&params(&[("from", "2026-11-01"), ("to", "2026-11-03"), ("group_by", "tenant,day")]), d2, false).unwrap();
    let rows = aggregate(rollups.clone(), &q).unwrap();
    let by = |rows: &[Row]| rows.iter().map(|(g, c)| (g.join("/"), c.requests)).collect::<Vec<_>>();
    assert_eq!(
        by(&rows),
        [("acme/2026-11-01".into(), 3), ("acme/2026-11-02".into(), 4), ("globex/2026-11-02".into(), 8)]
    );
    let q = parse(
        &params(&[("from", "2026-11-01"), ("to", "2026-11-05"), ("group_by", "deployment"), ("tenant", "acme")]),
        d2,
        false,
    )
    .unwrap();
    assert_eq!(by(&aggregate(rollups.clone(), &q).unwrap()), [("az".into(), 20), ("oa".into(), 3)]);
    // No grouping: one row, the total.
    let q = parse(&params(&[("from", "2026-11-01"), ("to", "2026-11-05")]), d2, false).unwrap();
    let rows = aggregate(rollups, &q).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].1.requests, rows[0].1.input_tokens, rows[0].1.cost_nanos), (31, 310, 3100));
    let json = to_json(&rows, &q, "EUR");
    assert_eq!(json["currency"], "EUR");
    assert_eq!(json["total"]["cost_decimal"], "0.000003100");
    assert_eq!((json["from"].as_str(), json["to"].as_str()), (Some("2026-11-01"), Some("2026-11-05")));
}

#[test]
fn too_many_rows_are_refused_saying_what_would_help() {
    let d = day(2026, 11, 1);
    let rollups = (0..=MAX_ROWS).map(|i| (key(d, "t", "", &format!("k{i}"), "d"), counts(1, 1, 1)));
    let q = parse(&params(&[("from", "2026-11-01"), ("to", "2026-11-02"), ("group_by", "key")]), d, false).unwrap();
    let err = aggregate(rollups, &q).unwrap_err();
    assert_eq!(err.0, "group_by");
    assert!(err.1.contains("more than 10000 rows"), "{}", err.1);
}

#[test]
fn csv_cells_are_quoted_and_formulas_neutralised() {
    assert_eq!(cell("acme"), "acme");
    assert_eq!(cell("a,b"), "\"a,b\"");
    assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_eq!(cell("two\nlines"), "\"two\nlines\"");
    for formula in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
        assert!(cell(formula).trim_start_matches('"').starts_with('\''), "{formula:?} → {}", cell(formula));
    }
    assert_eq!(cell("=HYPERLINK(\"x\",\"y\")"), "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\"");
}

#[test]
fn csv_has_a_header_and_one_row_per_group_in_exact_decimals() {
    let d = day(2026, 11, 1);
    let hostile = "=cmd|' /C calc'!A0,\"x\"\nnext";
    let rollups = vec![
        (key(d, hostile, "", "k", "d"), counts(1, 5, 1_500_000_001)),
        (key(d, "b", "", "k", "d"), counts(2, 6, 7)),
    ];
    let q = parse(&params(&[("from", "2026-11-01"), ("to", "2026-11-02"), ("group_by", "tenant")]), d, true).unwrap();
    let csv = to_csv(&aggregate(rollups, &q).unwrap(), &q, "USD");
    assert!(csv.starts_with(
        "\u{feff}tenant,requests,input_tokens,cached_input_tokens,output_tokens,reasoning_tokens,cost,currency,counted_requests,estimated_requests\r\n"
    ));
    let expected = "\"'=cmd|' /C calc'!A0,\"\"x\"\"\nnext\",1,5,0,1,0,1.500000001,USD,0,0\r\n";
    assert!(csv.contains(expected), "{csv:?}");
    assert!(csv.ends_with("b,2,6,0,1,0,0.000000007,USD,0,0\r\n"), "{csv:?}");
    assert_eq!(csv.matches("\r\n").count(), 3, "a header and two rows");
}
