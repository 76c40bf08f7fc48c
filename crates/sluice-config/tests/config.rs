//! The example config parses; every rejection rule names its field and line.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use sluice_config::{AzureSurface, OutputCounting, ProviderApi, ProviderKind, Secret, SecretSource, hash_key, parse};

const BASE: &str = r#"
[[providers]]
name = "oa"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "OA_KEY"

[[deployments]]
name = "d"
provider = "oa"
model = "gpt-4o"
limits = { rpm = 500, tpm = 30000 }

[[models]]
name = "fast"
deployment = "d"

[[tenants]]
name = "t"

[[keys]]
id = "k"
tenant = "t"
sha256 = "f9d2f05f48aa3417bcc39581f50a6ce2128f608cbacb7f2ddc28e6b1e07d5d46"
"#;

#[test]
fn example_config_is_valid_and_complete() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sluice.toml")).unwrap();
    let config = parse(&text).unwrap();
    assert_eq!(config.providers.len(), 3);
    assert_eq!(config.providers[1].kind, ProviderKind::Anthropic);
    assert_eq!(config.providers[1].api_key, SecretSource::File("/run/secrets/anthropic_api_key".into()));
    assert_eq!(config.providers[2].api_key, SecretSource::None);
    assert_eq!(config.deployments[1].output_counting, OutputCounting::Actual);
    assert_eq!(config.tenants[0].teams.len(), 2);
    assert_eq!(config.classes.iter().map(|c| &*c.name).collect::<Vec<_>>(), ["interactive", "batch"]);
    assert_eq!(config.keys[0].sha256, hash_key("sk-example-acme-search"));
    assert_eq!(config.keys[1].class, 1);
    assert_eq!(config.classes[1].share_permille, 600);
    assert_eq!(config.tenants[0].weight.get(), 2);
    assert_eq!(config.deployments[0].limits.rates.len(), 2);
}

#[test]
fn classes_below_the_highest_priority_leave_headroom_by_default() {
    let share = |classes: &str| {
        let config = parse(&format!("{BASE}\n{classes}")).unwrap();
        config.classes.iter().map(|c| (c.name.to_string(), c.share_permille)).collect::<Vec<_>>()
    };
    let named = |pairs: &[(&str, u16)]| pairs.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect::<Vec<_>>();
    // The default class (priority 0) is the highest: the whole burst; a batch class below it 0.75.
    let two = share("[[classes]]\nname = \"batch\"\npriority = 5\n");
    assert_eq!(two, named(&[("interactive", 1000), ("batch", 750)]));
    // A share named in the file wins, whatever the priority.
    let named_share = share("[[classes]]\nname = \"batch\"\npriority = 5\nshare = 0.9\n");
    assert_eq!(named_share[1], ("batch".to_owned(), 900));
    // The highest priority is the lowest number present, not 0.
    let own = share(
        "[[classes]]\nname = \"interactive\"\npriority = 2\n\n[[classes]]\nname = \"bulk\"\npriority = 3\n\n\
         [[classes]]\nname = \"live\"\npriority = 2\n",
    );
    assert_eq!(own, named(&[("interactive", 1000), ("bulk", 750), ("live", 1000)]));
}

#[test]
fn base_fixture_is_valid() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.models[0].default_max_tokens, 4_096);
    use sluice_config::Passthrough;
    assert_eq!(config.models[0].passthrough, [Passthrough::Completions, Passthrough::Moderations], "the default");
    let listed =
        parse(&BASE.replacen("deployment = \"d\"\n", "deployment = \"d\"\npassthrough = [\"images\", \"audio\"]\n", 1));
    assert_eq!(listed.unwrap().models[0].passthrough, [Passthrough::Images, Passthrough::Audio]);
    assert_eq!(config.deployments[0].limits.rates[1].burst.get(), 500);
}

/// Every scope of BASE with a 20,000 TPM limit, and 1,000 TPD on the key.
fn every_scope_at_20k_tpm(key_limits: &str) -> String {
    let tpm = "limits = { tpm = 20000 }";
    BASE.replace("limits = { rpm = 500, tpm = 30000 }", tpm)
        .replace("deployment = \"d\"\n", &format!("deployment = \"d\"\n{tpm}\n"))
        .replace(
            "name = \"t\"\n",
            &format!("name = \"t\"\n{tpm}\n\n  [[tenants.teams]]\n  name = \"search\"\n  {tpm}\n"),
        )
        .replace("tenant = \"t\"\n", &format!("tenant = \"t\"\nteam = \"search\"\nlimits = {{ {key_limits} }}\n"))
        + &format!("\n[org]\n{tpm}\n")
}

#[test]
fn caller_scopes_pass_their_whole_minute_at_once_and_provider_scopes_one_second() {
    let config = parse(&every_scope_at_20k_tpm("tpm = 20000, tpd = 1000")).unwrap();
    let burst = |limits: &sluice_quota::Limits| limits.rates[0].burst.get();
    assert_eq!(sluice_config::CALLER_BURST, Duration::from_secs(60));
    assert_eq!(sluice_config::PROVIDER_BURST, Duration::from_secs(1));
    assert_eq!(burst(&config.org.1), 20_000, "the org");
    assert_eq!(burst(&config.tenants[0].limits), 20_000, "a tenant");
    assert_eq!(burst(&config.tenants[0].teams[0].limits), 20_000, "a team");
    assert_eq!(burst(&config.keys[0].limits), 20_000, "a key");
    assert_eq!(burst(&config.models[0].limits), 20_000, "a model profile");
    assert_eq!(config.keys[0].limits.rates[1].burst.get(), 1_000, "a per-day limit: the day");
    let deployment = &config.deployments[0].limits.rates[0];
    assert_eq!((deployment.burst.get(), deployment.guard), (333, true), "one second's worth, guarded");
    assert!(config.tenants[0].limits.rates.iter().all(|r| !r.guard), "a caller scope keeps no send guard");
}

#[test]
fn burst_seconds_overrides_either_default() {
    let config = parse(&every_scope_at_20k_tpm("tpm = 20000, burst_seconds = 3")).unwrap();
    assert_eq!(config.keys[0].limits.rates[0].burst.get(), 1_000, "three seconds of the key's rate");
    let text = BASE.replace("tpm = 30000 }", "tpm = 30000, burst_seconds = 10 }");
    let deployment = &parse(&text).unwrap().deployments[0].limits.rates[1];
    assert_eq!((deployment.burst.get(), deployment.guard), (5_000, true));
}

/// (edit to BASE, expected field, expected line, words the message must contain)
const BAD: &[(&str, &str, &str, usize, &str)] = &[
    ("kind = \"openai\"", "kind = \"opneai\"", "providers[0].kind", 4, "unknown kind `opneai`"),
    ("base_url = \"http://127.0.0.1:9\"", "base_url = \"127.0.0.1:9\"", "providers[0].base_url", 5, "http://"),
    ("api_key_env = \"OA_KEY\"", "", "providers[0]", 3, "api_key_env or api_key_file"),
    ("provider = \"oa\"", "provider = \"ob\"", "deployments[0].provider", 10, "no provider named `ob` (known: oa)"),
    ("rpm = 500", "rpm = 0", "deployments[0].limits.rpm", 12, "positive"),
    ("deployment = \"d\"", "deployment = \"e\"", "models[0].deployment", 16, "no deployment named `e`"),
    (
        "deployment = \"d\"\n",
        "deployment = \"d\"\npassthrough = [\"images\",\n  \"imgaes\"]\n",
        "models[0].passthrough[1]",
        18,
        "unknown endpoint `imgaes` (known: completions, moderations, images, audio",
    ),
    (
        "deployment = \"d\"\n",
        "deployment = \"d\"\npassthrough = [\"audio\", \"audio\"]\n",
        "models[0].passthrough[1]",
        17,
        "`audio` is listed twice",
    ),
    ("tenant = \"t\"", "tenant = \"u\"", "keys[0].tenant", 23, "no tenant named `u`"),
    ("sha256 = \"f9d2", "sha256 = \"zz", "keys[0].sha256", 24, "64 hex digits"),
    ("name = \"fast\"", "name = \"fast\"\nlimits = { tpmm = 5 }", "tpmm", 16, "unknown field `tpmm`"),
    ("name = \"t\"", "name = \"t\"\nlimits = { rpm = \"many\" }", "rpm", 20, "invalid type"),
    ("model = \"gpt-4o\"", "model = \"gpt-4o\"\ntokenizer = \"bpe\"", "deployments[0].tokenizer", 12, "chars/N"),
    ("name = \"t\"", "name = \"t\"\nweight = 0", "tenants[0].weight", 20, "between 1 and"),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\npreset = \"openai-tier-9\"",
        "deployments[0].preset",
        12,
        "unknown preset `openai-tier-9`",
    ),
    ("limits = { rpm = 500, tpm = 30000 }", "preset = \"azure\"", "deployments[0].preset", 12, "set `limits.tpm`"),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\noutput_estimate = \"p95\"",
        "deployments[0].output_estimate",
        12,
        "output_counting = \"actual\"",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\noutput_estimate = \"p50\"",
        "deployments[0].output_estimate",
        12,
        "strict or p95",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\noutput_counting = \"actual\"\noutput_warmup = 0",
        "deployments[0].output_warmup",
        13,
        "between 1 and",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\ncache_aware_input = true",
        "deployments[0].cache_aware_input",
        12,
        "only Anthropic",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\ndecrease_factor = 1.5",
        "deployments[0].decrease_factor",
        12,
        "between 0 (exclusive) and 0.99",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nmin_factor = 0.0",
        "deployments[0].min_factor",
        12,
        "between 0 (exclusive) and 1",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nramp_up_per_second = 2.0",
        "deployments[0].ramp_up_per_second",
        12,
        "between 0 (exclusive) and 1",
    ),
    ("model = \"gpt-4o\"", "model = \"gpt-4o\"\nrecovery = \"soon\"", "deployments[0].recovery", 12, "not a duration"),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nstream_idle_timeout = \"0s\"",
        "deployments[0].stream_idle_timeout",
        12,
        "longer than zero",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nwindow_floor = \"5ms\"",
        "deployments[0].window_floor",
        12,
        "between 20ms and 60s",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nwindow_floor = \"2m\"",
        "deployments[0].window_floor",
        12,
        "between 20ms and 60s",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nwindow_hold = \"0s\"",
        "deployments[0].window_hold",
        12,
        "longer than zero",
    ),
    (
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nwindow_regrow = \"later\"",
        "deployments[0].window_regrow",
        12,
        "not a duration",
    ),
    ("model = \"gpt-4o\"", "model = \"gpt-4o\"\nlearn_window = \"no\"", "learn_window", 12, "expected a boolean"),
];

#[test]
fn window_learning_defaults_and_can_be_set_or_switched_off_per_deployment() {
    use sluice_config::{WindowLearning, adaptive};
    let plain = parse(BASE).unwrap().deployments[0].adaptive.window;
    let defaults = WindowLearning {
        enabled: true,
        floor: adaptive::WINDOW_FLOOR,
        hold: adaptive::WINDOW_HOLD,
        regrow: adaptive::WINDOW_REGROW,
    };
    assert_eq!(plain, defaults);
    let text = BASE.replacen(
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nlearn_window = false\nwindow_floor = \"100ms\"\nwindow_hold = \"30s\"\nwindow_regrow = \"5m\"",
        1,
    );
    let set = parse(&text).unwrap().deployments[0].adaptive.window;
    let expected = WindowLearning {
        enabled: false,
        floor: Duration::from_millis(100),
        hold: Duration::from_secs(30),
        regrow: Duration::from_secs(300),
    };
    assert_eq!(set, expected);
}

#[test]
fn stream_idle_timeout_defaults_to_a_minute_and_can_be_set_per_deployment() {
    let default = parse(BASE).unwrap();
    assert_eq!(default.deployments[0].stream_idle_timeout, std::time::Duration::from_secs(60));
    let set =
        parse(&BASE.replacen("model = \"gpt-4o\"", "model = \"gpt-4o\"\nstream_idle_timeout = \"5s\"", 1)).unwrap();
    assert_eq!(set.deployments[0].stream_idle_timeout, std::time::Duration::from_secs(5));
}

#[test]
fn presets_fill_what_limits_leave_out_and_adaptive_settings_parse() {
    use sluice_config::{OutputEstimate, adaptive};
    use sluice_quota::Dimension;
    let amounts = |c: &sluice_config::Config| -> Vec<(Dimension, u64)> {
        c.deployments[0].limits.rates.iter().map(|r| (r.dimension, r.amount.get())).collect()
    };
    // Explicit limits win; the preset fills the rest.
    let tier = parse(&BASE.replacen(
        "limits = { rpm = 500, tpm = 30000 }",
        "preset = \"openai-tier-1\"\nlimits = { rpm = 100 }",
        1,
    ))
    .unwrap();
    assert_eq!(amounts(&tier), [(Dimension::Requests, 100), (Dimension::TotalTokens, 30_000)]);
    // Azure: 6 RPM per 1,000 TPM of the deployment's quota.
    let azure =
        parse(&BASE.replacen("limits = { rpm = 500, tpm = 30000 }", "preset = \"azure\"\nlimits = { tpm = 80000 }", 1))
            .unwrap();
    assert_eq!(amounts(&azure), [(Dimension::Requests, 480), (Dimension::TotalTokens, 80_000)]);
    let text = BASE.replacen(
        "model = \"gpt-4o\"",
        "model = \"gpt-4o\"\nadopt_provider_limits = true\noutput_counting = \"actual\"\noutput_estimate = \"p95\"\noutput_warmup = 20\nramp_up_per_second = 0.05\nrecovery = \"30s\"",
        1,
    );
    let a = parse(&text).unwrap().deployments[0].adaptive;
    assert!(a.adopt_provider_limits);
    assert_eq!(a.output_estimate, OutputEstimate::P95 { warmup: 20 });
    assert_eq!(
        (a.ramp_up, a.recovery, a.decrease),
        (Some(0.05), std::time::Duration::from_secs(30), adaptive::DECREASE)
    );
    let plain = parse(BASE).unwrap().deployments[0].adaptive;
    assert_eq!(
        (plain.adopt_provider_limits, plain.output_estimate, plain.ramp_up),
        (false, OutputEstimate::Strict, None)
    );
    assert!(adaptive::preset_names().contains(&"anthropic-start"));
    // Gemini tiers: RPM, input-only TPM and RPD; an explicit rpd wins.
    let gemini = parse(&BASE.replacen(
        "limits = { rpm = 500, tpm = 30000 }",
        "preset = \"gemini-tier-1-flash\"\nlimits = { rpd = 500 }",
        1,
    ))
    .unwrap();
    assert_eq!(
        amounts(&gemini),
        [(Dimension::Requests, 1_000), (Dimension::InputTokens, 1_000_000), (Dimension::Requests, 500)]
    );
}

#[test]
fn every_rejection_names_field_and_line() {
    for &(from, to, field, line, words) in BAD {
        assert!(BASE.contains(from), "fixture edit `{from}` does not apply");
        let text = BASE.replacen(from, to, 1);
        let err = parse(&text).unwrap_err();
        assert_eq!(err.field, field, "{err}");
        assert_eq!(err.line, Some(line), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
        assert!(err.to_string().starts_with(&format!("line {line}")), "{err}");
    }
}

#[test]
fn duplicates_and_server_settings_are_checked() {
    let dup = format!("{BASE}\n[[tenants]]\nname = \"t\"\n");
    let err = parse(&dup).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("tenants[1].name", Some(27)));
    assert!(err.message.contains("defined twice"));

    let server = format!("[server]\nlisten = \"nowhere\"\n{BASE}");
    let err = parse(&server).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("server.listen", Some(2)));

    let server = format!("[server]\nupstream_timeout = \"soon\"\n{BASE}");
    let err = parse(&server).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("server.upstream_timeout", Some(2)));

    let class = format!("{BASE}\n[[classes]]\nname = \"batch\"\nshare = 1.5\n");
    let err = parse(&class).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("classes[0].share", Some(28)));

    let unknown_section = format!("{BASE}\n[routing]\nx = 1\n");
    let err = parse(&unknown_section).unwrap_err();
    assert!(err.message.contains("unknown field `routing`"), "{err}");
}

/// Each `(section, field, line, words)`: `section` put before [`BASE`] is refused, naming
/// `field` on `line` with a message containing `words`.
fn assert_rejected_before_base(cases: &[(&str, &str, usize, &str)]) {
    for &(section, field, line, words) in cases {
        let err = parse(&format!("{section}{BASE}")).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(line)), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
}

#[test]
fn body_pace_and_connection_caps_are_validated() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.server.body.timeout, Duration::from_secs(30));
    assert_eq!((config.server.max_connections.get(), config.server.max_connections_per_peer.get()), (10_000, 1_000));
    let set = "[server]\nbody_read_timeout = \"2s\"\nbody_min_rate = 100\nmax_connections = 50\n";
    let config = parse(&format!("{set}{BASE}")).unwrap();
    assert_eq!(config.server.body.allowed(250), Duration::from_secs(4), "2s, and 1s per 100 bytes");
    assert_eq!(config.server.max_connections_per_peer.get(), 50, "the per-peer default is at most the process cap");
    let config = parse(&format!("[server]\nmax_connections = 50000\n{BASE}")).unwrap();
    assert_eq!(config.server.max_connections_per_peer.get(), 1_000, "the per-peer default does not grow with it");
    let cases = [
        ("[server]\nbody_read_timeout = \"0s\"\n", "server.body_read_timeout", 2, "longer than zero"),
        ("[server]\nbody_read_timeout = \"soon\"\n", "server.body_read_timeout", 2, "not a duration"),
        ("[server]\nbody_min_rate = 0\n", "server.body_min_rate", 2, "at least 1"),
        ("[server]\nupstream_proxy = \"proxy:3128\"\n", "server.upstream_proxy", 2, "http:// proxy URL"),
        ("[server]\nmax_connections = 0\n", "server.max_connections", 2, "at least 1"),
        ("[server]\nmax_connections_per_peer = 0\n", "server.max_connections_per_peer", 2, "at least 1"),
        (
            "[server]\nmax_connections = 10\nmax_connections_per_peer = 11\n",
            "server.max_connections_per_peer",
            3,
            "must not exceed max_connections",
        ),
    ];
    assert_rejected_before_base(&cases);
}

#[test]
fn access_log_settings_are_validated() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.server.access_log, sluice_config::AccessLog { enabled: true, sample: 1.0 });
    let config = parse(&format!("[server]\naccess_log = false\naccess_log_sample = 0.25\n{BASE}")).unwrap();
    assert_eq!(config.server.access_log, sluice_config::AccessLog { enabled: false, sample: 0.25 });
    let cases = [
        ("[server]\naccess_log_sample = 1.5\n", "server.access_log_sample", 2, "between 0.0 and 1.0"),
        ("[server]\naccess_log_sample = -0.1\n", "server.access_log_sample", 2, "between 0.0 and 1.0"),
    ];
    assert_rejected_before_base(&cases);
}

#[test]
fn store_settings_are_validated() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.store.kind, sluice_config::StoreKind::Memory);
    let redis = format!(
        "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\non_unavailable = \"fail_open_local\"\ninstances = 3\n{BASE}"
    );
    let config = parse(&redis).unwrap();
    assert_eq!(config.store.kind, sluice_config::StoreKind::Redis("redis://127.0.0.1:6379".into()));
    assert_eq!(config.store.on_unavailable, sluice_config::Unavailable::FailOpenLocal);
    assert_eq!(config.store.instances.get(), 3);
    assert_eq!(config.store.tls, sluice_config::StoreTls::default());
    assert_eq!(config.telemetry.otlp_endpoint, None);
    let traced = parse(&format!("[telemetry]\notlp_endpoint = \"http://collector:4318\"\n{BASE}")).unwrap();
    assert_eq!(traced.telemetry.otlp_endpoint.as_deref(), Some("http://collector:4318"));
    let tls = format!(
        "[store]\nkind = \"redis\"\nurl = \"rediss://r:6380\"\ntls_ca_file = \"ca.pem\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\n{BASE}"
    );
    let config = parse(&tls).unwrap();
    assert_eq!(config.store.tls.ca_file, Some("ca.pem".into()));
    assert_eq!(config.store.tls.client, Some(("c.pem".into(), "k.pem".into())));
    let cases = [
        ("[store]\nkind = \"redis\"\n", "store.kind", 2, "needs `url` or `cluster`"),
        ("[store]\nkind = \"redis\"\nurl = \"http://x\"\n", "store.url", 3, "redis://"),
        ("[store]\nkind = \"etcd\"\n", "store.kind", 2, "unknown store `etcd`"),
        ("[store]\nurl = \"redis://x\"\n", "store.url", 2, "kind = \"redis\""),
        ("[store]\nkind = \"redis\"\ncluster = []\n", "store.cluster", 3, "non-empty"),
        ("[store]\non_unavailable = \"shrug\"\n", "store.on_unavailable", 2, "fail_closed or fail_open_local"),
        ("[store]\ninstances = 0\n", "store.instances", 2, "positive"),
        ("[store]\ntls_ca_file = \"ca.pem\"\n", "store.tls_ca_file", 2, "rediss://"),
        ("[telemetry]\notlp_endpoint = \"collector:4318\"\n", "telemetry.otlp_endpoint", 2, "http:// or https://"),
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://x\"\ntls_ca_file = \"ca.pem\"\n",
            "store.tls_ca_file",
            4,
            "rediss://",
        ),
        (
            "[store]\nkind = \"redis\"\nurl = \"rediss://x\"\ntls_cert_file = \"c.pem\"\n",
            "store.tls_key_file",
            4,
            "needs tls_key_file",
        ),
    ];
    assert_rejected_before_base(&cases);
}

#[test]
fn redis_credentials_come_from_a_variable_or_a_file_for_every_topology() {
    let stores = [
        "[store]\nkind = \"redis\"\nurl = \"redis://r:6379\"\n",
        "[store]\nkind = \"redis\"\ncluster = [\"redis://a:7000\", \"redis://b:7001\"]\n",
        "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:26379\"]\n",
    ];
    for store in stores {
        // `[store]` keys go before a `[store.sentinel]` table.
        let with = |lines: &str| store.replacen("kind = \"redis\"\n", &format!("kind = \"redis\"\n{lines}"), 1);
        let by_env = parse(&format!("{}{BASE}", with("username = \"sluice\"\npassword_env = \"REDIS_PASSWORD\"\n")));
        let auth = by_env.unwrap().store.auth;
        assert_eq!(auth.username.as_deref(), Some("sluice"), "{store}");
        assert_eq!(auth.password, Some(Secret::Env("REDIS_PASSWORD".into())), "{store}");
        let by_file = parse(&format!("{}{BASE}", with("password_file = \"/run/secrets/redis\"\n"))).unwrap();
        assert_eq!(by_file.store.auth.password, Some(Secret::File("/run/secrets/redis".into())), "{store}");
        let both = with("password_env = \"P\"\npassword_file = \"/p\"\n");
        let err = parse(&format!("{both}{BASE}")).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), ("store.password_file", Some(4)), "{err}");
    }
    assert_eq!(parse(BASE).unwrap().store.auth, sluice_config::RedisAuth::default());
    let cases = [
        ("[store]\npassword_env = \"P\"\n", "store.password_env", 2, "kind = \"redis\""),
        ("[store]\nkind = \"redis\"\nurl = \"redis://:${REDIS_PASSWORD}@r:6379\"\n", "store.url", 3, "not expanded"),
        (
            "[store]\nkind = \"redis\"\ncluster = [\"redis://a:1\", \"redis://${HOST}:2\"]\n",
            "store.cluster",
            3,
            "password_env",
        ),
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://u:secret@r:6379\"\npassword_env = \"P\"\n",
            "store.url",
            3,
            "keep one",
        ),
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://r\"\npassword_env = \"$P\"\n",
            "store.password_env",
            4,
            "without `$`",
        ),
        (
            "[store]\nkind = \"redis\"\npassword_env = \"A\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:1\"]\npassword_env = \"B\"\n",
            "store.sentinel.password_env",
            7,
            "set it once",
        ),
    ];
    assert_rejected_before_base(&cases);
    // A password in the URL alone is still taken (and never shown).
    let in_url = format!("[store]\nkind = \"redis\"\nurl = \"redis://:pw@r:6379\"\n{BASE}");
    assert_eq!(parse(&in_url).unwrap().store.auth, sluice_config::RedisAuth::default());
}

#[test]
fn a_ledger_is_a_postgres_url_beside_a_redis_store() {
    let redis = "[store]\nkind = \"redis\"\nurl = \"redis://r:6379\"\n";
    let text =
        format!("{redis}[ledger]\nurl = \"postgres://sluice@db:5432/sluice\"\npassword_env = \"PGPASS\"\n{BASE}");
    let ledger = parse(&text).unwrap().ledger.unwrap();
    assert_eq!(
        (ledger.url.as_str(), ledger.password_env.as_deref()),
        ("postgres://sluice@db:5432/sluice", Some("PGPASS"))
    );
    assert_eq!((ledger.timeout, ledger.flush_every), (Duration::from_secs(5), Duration::from_millis(250)));
    assert!(!format!("{ledger:?}").contains("db:5432"), "the URL (it may hold a password) is not shown");
    assert!(parse(BASE).unwrap().ledger.is_none());
    let cases = [
        ("[ledger]\nurl = \"postgres://db/s\"\n", "ledger.url", 2, "[store] kind = \"redis\""),
        (&*format!("{redis}[ledger]\nurl = \"mysql://db/s\"\n"), "ledger.url", 5, "postgres://"),
        (
            &*format!("{redis}[ledger]\nurl = \"postgres://db/s\"\nflush_every = \"5s\"\n"),
            "ledger.flush_every",
            6,
            "at most 1s",
        ),
        (&*format!("{redis}[ledger]\nurl = \"postgres://db/s\"\nhost = \"db\"\n"), "ledger.host", 6, "unknown field"),
    ];
    for (text, field, line, words) in cases {
        let err = parse(&format!("{text}{BASE}")).unwrap_err();
        assert_eq!((err.line, err.message.contains(words)), (Some(line), true), "{field}: {err}");
    }
}

#[test]
fn a_providers_ca_file_is_read_at_load() {
    let dir = std::env::temp_dir().join(format!("sluice-config-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let https = |file: &std::path::Path| {
        BASE.replacen("http://127.0.0.1:9\"", &format!("https://llm.internal\"\nca_file = \"{}\"", file.display()), 1)
    };
    let config = parse(&https(&ca)).unwrap();
    assert_eq!(config.providers[0].ca_file.as_deref(), Some(ca.as_path()));
    for (text, words) in [
        (https(&empty), "holds no PEM certificate"),
        (https(&dir.join("missing.pem")), "cannot read"),
        (https(&ca).replacen("https://", "http://", 1), "https:// base_url"),
    ] {
        let err = parse(&text).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), ("providers[0].ca_file", Some(6)), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sentinel_store_settings_are_validated() {
    let sentinel = format!(
        "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \"main\"\nnodes = [\"redis://s1:26379\", \"redis://s2:26379\"]\ndb = 2\npassword_env = \"REDIS_PASSWORD\"\n{BASE}"
    );
    let config = parse(&sentinel).unwrap();
    let expected = sluice_config::SentinelStore {
        nodes: vec!["redis://s1:26379".into(), "redis://s2:26379".into()],
        master: "main".into(),
        db: 2,
    };
    assert_eq!(config.store.kind, sluice_config::StoreKind::RedisSentinel(expected));
    // The older spelling under `[store.sentinel]` is the one `[store]` has for every topology.
    let auth = sluice_config::RedisAuth { username: None, password: Some(Secret::Env("REDIS_PASSWORD".into())) };
    assert_eq!(config.store.auth, auth);
    let tls = format!(
        "[store]\nkind = \"redis\"\ntls_ca_file = \"ca.pem\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"rediss://s1:26379\"]\n{BASE}"
    );
    assert_eq!(parse(&tls).unwrap().store.tls.ca_file, Some("ca.pem".into()));
    let cases = [
        (
            "[store]\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:1\"]\n",
            "store.sentinel",
            3,
            "kind = \"redis\"",
        ),
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://x\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:1\"]\n",
            "store.sentinel",
            5,
            "only one",
        ),
        (
            "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \"m\"\nnodes = []\n",
            "store.sentinel.nodes",
            5,
            "non-empty",
        ),
        (
            "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"rediss://a:1\", \"redis://b:1\"]\n",
            "store.sentinel.nodes",
            5,
            "all rediss:// or none",
        ),
        (
            "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \" \"\nnodes = [\"redis://s:1\"]\n",
            "store.sentinel.master",
            4,
            "master group",
        ),
        (
            "[store]\nkind = \"redis\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:1\"]\ndb = -1\n",
            "store.sentinel.db",
            6,
            "0 or more",
        ),
        (
            "[store]\nkind = \"redis\"\ntls_ca_file = \"ca.pem\"\n[store.sentinel]\nmaster = \"m\"\nnodes = [\"redis://s:1\"]\n",
            "store.tls_ca_file",
            3,
            "rediss://",
        ),
    ];
    assert_rejected_before_base(&cases);
}

#[test]
fn job_settings_and_max_attempts_are_validated() {
    let config = parse(BASE).unwrap();
    assert_eq!(config.classes[0].max_attempts, 5);
    assert_eq!(config.jobs.workers, 4);
    assert_eq!(config.jobs.path, std::path::PathBuf::from("sluice-jobs.redb"));
    assert_eq!(config.jobs.visibility_timeout, std::time::Duration::from_secs(30));
    assert_eq!((config.jobs.max_file_bytes, config.jobs.max_batch_lines), (50 << 20, 50_000));
    assert_eq!(config.jobs.max_tenant_file_bytes, 1 << 30);
    let set = format!(
        "{BASE}\n[[classes]]\nname = \"batch\"\nmax_attempts = 8\n\n[jobs]\npath = \"/tmp/j.redb\"\nworkers = 2\nvisibility_timeout = \"5s\"\nmax_file_bytes = 1024\nmax_batch_lines = 10\nmax_tenant_file_bytes = 4096\n"
    );
    let config = parse(&set).unwrap();
    assert_eq!(config.classes.iter().find(|c| &*c.name == "batch").unwrap().max_attempts, 8);
    assert_eq!((config.jobs.workers, config.jobs.visibility_timeout.as_secs()), (2, 5));
    assert_eq!((config.jobs.max_file_bytes, config.jobs.max_batch_lines), (1024, 10));
    assert_eq!(config.jobs.max_tenant_file_bytes, 4096);
    let cases = [
        (
            "[jobs]\nmax_file_bytes = 1024\nmax_tenant_file_bytes = 1023\n",
            "jobs.max_tenant_file_bytes",
            28,
            "at least jobs.max_file_bytes (1024)",
        ),
        (
            "[jobs]\nmax_tenant_file_bytes = 10\n",
            "jobs.max_tenant_file_bytes",
            27,
            "at least jobs.max_file_bytes (52428800)",
        ),
        ("[jobs]\nmax_file_bytes = 0\n", "jobs.max_file_bytes", 27, "between 1 and 536870912"),
        ("[jobs]\nmax_batch_lines = 50001\n", "jobs.max_batch_lines", 27, "between 1 and 50000"),
        ("[[classes]]\nname = \"batch\"\nmax_attempts = 0\n", "classes[0].max_attempts", 28, "between 1 and 100"),
        ("[[classes]]\nname = \"batch\"\nmax_attempts = 1000\n", "classes[0].max_attempts", 28, "between 1 and 100"),
        ("[jobs]\nworkers = 1000\n", "jobs.workers", 27, "at most 256"),
        ("[jobs]\npath = \" \"\n", "jobs.path", 27, "must name a file"),
        ("[jobs]\nvisibility_timeout = \"10ms\"\n", "jobs.visibility_timeout", 27, "at least 1s"),
        ("[jobs]\nvisibility = \"10s\"\n", "", 27, "unknown field `visibility`"),
    ];
    for (extra, field, line, words) in cases {
        let err = parse(&format!("{BASE}\n{extra}")).unwrap_err();
        if !field.is_empty() {
            assert_eq!(err.field, field, "{err}");
        }
        assert_eq!(err.line, Some(line), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
}

#[test]
fn routing_settings_are_validated() {
    let with =
        |model_extra: &str| BASE.replacen("deployment = \"d\"\n", &format!("deployment = \"d\"\n{model_extra}"), 1);
    let ok = with("fallbacks = [{ deployment = \"d\", when = [\"provider_5xx\", \"primary_unavailable\"] }]\n");
    let config = parse(&ok).unwrap();
    assert_eq!(config.models[0].fallbacks[0].when.len(), 2);
    let cases = [
        (
            "fallbacks = [{ deployment = \"d\", when = [\"sometimes\"] }]\n",
            "models[0].fallbacks[0].when",
            "unknown condition `sometimes`",
        ),
        (
            "fallbacks = [{ deployment = \"e\", when = [\"provider_5xx\"] }]\n",
            "models[0].fallbacks[0].deployment",
            "no deployment named `e`",
        ),
        ("fallbacks = [{ deployment = \"d\", when = [] }]\n", "models[0].fallbacks[0].when", "at least one"),
        (
            "degrade_to = { deployment = \"d\", classes = [\"vip\"] }\n",
            "models[0].degrade_to.classes",
            "no class named `vip`",
        ),
    ];
    for (extra, field, words) in cases {
        let err = parse(&with(extra)).unwrap_err();
        assert_eq!(err.field, field, "{err}");
        assert_eq!(err.line, Some(17), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
    let breaker = BASE.replacen("model = \"gpt-4o\"", "model = \"gpt-4o\"\nbreaker_failures = 0", 1);
    let err = parse(&breaker).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("deployments[0].breaker_failures", Some(12)));
    let class = format!("{BASE}\n[[classes]]\nname = \"batch\"\nretry_attempts = 0\n");
    let err = parse(&class).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("classes[0].retry_attempts", Some(28)));
}

#[test]
fn azure_and_gemini_providers_are_addressed_from_their_fields() {
    let azure = BASE.replacen("kind = \"openai\"", "kind = \"azure\"\napi_version = \"2024-10-21\"", 1).replacen(
        "limits = { rpm = 500, tpm = 30000 }",
        "azure_deployment = \"gpt4o-east\"\nlimits = { tpm = 30000 }",
        1,
    );
    let config = parse(&azure).unwrap();
    let classic = AzureSurface::Classic { api_version: "2024-10-21".into() };
    assert_eq!(config.providers[0].api, ProviderApi::Azure(classic));
    assert_eq!(config.deployments[0].azure_deployment.as_deref(), Some("gpt4o-east"));
    let rpm = config.deployments[0].limits.rates.iter().find(|r| r.dimension == sluice_quota::Dimension::Requests);
    assert_eq!(rpm.map(|r| r.amount.get()), Some(180), "6 RPM per 1,000 TPM: 30,000 TPM give 180 RPM");

    let v1 = BASE.replacen("kind = \"openai\"", "kind = \"azure\"\napi_surface = \"v1\"", 1).replacen(
        "api_key_env = \"OA_KEY\"",
        "token_file = \"/run/entra/token\"",
        1,
    );
    let config = parse(&v1).unwrap();
    assert_eq!(config.providers[0].api, ProviderApi::Azure(AzureSurface::V1));
    assert_eq!(config.providers[0].api_key, SecretSource::TokenFile("/run/entra/token".into()));
    assert_eq!(config.deployments[0].azure_deployment.as_deref(), Some("gpt-4o"), "defaults to the model");

    let gemini = BASE.replacen("kind = \"openai\"", "kind = \"gemini\"", 1);
    assert_eq!(parse(&gemini).unwrap().providers[0].api, ProviderApi::GeminiOpenAi);
    assert_eq!(parse(BASE).unwrap().providers[0].api, ProviderApi::Plain);
}

#[test]
fn cloud_provider_fields_are_refused_where_they_do_not_belong() {
    let azure = |extra: &str| BASE.replacen("kind = \"openai\"", &format!("kind = \"azure\"{extra}"), 1);
    let cases: [(String, &str, usize, &str); 8] = [
        (azure(""), "providers[0].api_version", 4, "needs api_version"),
        (azure("\napi_surface = \"v2\""), "providers[0].api_surface", 5, "classic or v1"),
        (
            azure("\napi_surface = \"v1\"\napi_version = \"2024-10-21\""),
            "providers[0].api_version",
            6,
            "takes no api_version",
        ),
        (azure("\napi_version = \"x\"\ntoken_file = \"/t\""), "providers[0].token_file", 6, "not several"),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"openai\"\napi_version = \"x\"", 1),
            "providers[0].api_version",
            5,
            "only for kind = \"azure\"",
        ),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"openai\"\ntoken_file = \"/t\"", 1),
            "providers[0].token_file",
            5,
            "only for kind",
        ),
        (
            BASE.replacen("model = \"gpt-4o\"", "model = \"gpt-4o\"\nazure_deployment = \"x\"", 1),
            "deployments[0].azure_deployment",
            12,
            "only for a provider of kind \"azure\"",
        ),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"gemini\"", 1).replacen(
                "http://127.0.0.1:9",
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                1,
            ),
            "providers[0].base_url",
            5,
            "the host alone",
        ),
    ];
    for (text, field, line, words) in cases {
        let err = parse(&text).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(line)), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
}

#[test]
fn cloud_example_config_is_valid() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cloud.toml")).unwrap();
    let config = parse(&text).unwrap();
    assert_eq!(config.providers[1].api, ProviderApi::Azure(AzureSurface::V1));
    assert_eq!(config.providers[2].api, ProviderApi::GeminiOpenAi);
    let rpm = |d: usize| {
        config.deployments[d]
            .limits
            .rates
            .iter()
            .find(|r| r.dimension == sluice_quota::Dimension::Requests)
            .map(|r| r.amount.get())
    };
    assert_eq!((rpm(0), rpm(1)), (Some(900), Some(500)), "derived from tpm; explicit wins");
}

#[test]
fn gemini_native_and_vertex_providers_are_addressed_from_their_fields() {
    let native = BASE.replacen("kind = \"openai\"", "kind = \"gemini\"\napi_surface = \"native\"", 1);
    assert_eq!(parse(&native).unwrap().providers[0].api, ProviderApi::GeminiNative);
    let vertex = |extra: &str| {
        BASE.replacen(
            "kind = \"openai\"",
            &format!("kind = \"vertex\"\nproject = \"acme-ai\"\nregion = \"us-east5\"{extra}"),
            1,
        )
        .replacen("api_key_env = \"OA_KEY\"", "service_account_file = \"/run/sa.json\"", 1)
    };
    let config = parse(&vertex("\npublisher = \"anthropic\"")).unwrap();
    let location = sluice_config::VertexLocation { project: "acme-ai".into(), region: "us-east5".into() };
    assert_eq!(config.providers[0].api, ProviderApi::Vertex(location));
    assert_eq!(config.providers[0].kind, ProviderKind::Anthropic);
    assert_eq!(config.providers[0].api_key, SecretSource::ServiceAccount("/run/sa.json".into()));
    assert_eq!(parse(&vertex("")).unwrap().providers[0].kind, ProviderKind::OpenAi, "Gemini by default");
}

#[test]
fn google_fields_are_refused_where_they_do_not_belong() {
    let vertex = |extra: &str| {
        BASE.replacen("kind = \"openai\"", &format!("kind = \"vertex\"{extra}"), 1).replacen(
            "api_key_env = \"OA_KEY\"",
            "service_account_file = \"/sa.json\"",
            1,
        )
    };
    let cases: [(String, &str, usize, &str); 6] = [
        (vertex("\nregion = \"us-east5\""), "providers[0].project", 4, "needs project"),
        (vertex("\nproject = \"p\"\nregion = \"us/east\""), "providers[0].region", 6, "letters, digits"),
        (
            vertex("\nproject = \"p\"\nregion = \"r\"\npublisher = \"meta\""),
            "providers[0].publisher",
            7,
            "google or anthropic",
        ),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"vertex\"\nproject = \"p\"\nregion = \"r\"", 1),
            "providers[0].api_key_env",
            8,
            "service_account_file",
        ),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"openai\"\nproject = \"p\"", 1),
            "providers[0].project",
            5,
            "only for kind = \"vertex\"",
        ),
        (
            BASE.replacen("kind = \"openai\"", "kind = \"gemini\"\napi_surface = \"grpc\"", 1),
            "providers[0].api_surface",
            5,
            "openai or native",
        ),
    ];
    for (text, field, line, words) in cases {
        let err = parse(&text).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(line)), "{err}");
        assert!(err.message.contains(words), "`{}` lacks `{words}`", err.message);
    }
}

#[test]
fn google_example_configs_are_valid() {
    let read =
        |name: &str| std::fs::read_to_string(format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let gemini = parse(&read("gemini.toml")).unwrap();
    assert_eq!(gemini.providers[0].api, ProviderApi::GeminiNative);
    let vertex = parse(&read("vertex.toml")).unwrap();
    assert!(matches!(vertex.providers[0].api, ProviderApi::Vertex(_)));
    assert_eq!(vertex.providers[1].kind, ProviderKind::Anthropic);
    assert_eq!(vertex.providers[1].api_key, SecretSource::ServiceAccount("/run/secrets/vertex-sa.json".into()));
}

#[test]
fn a_deployment_price_is_read_and_bad_prices_are_refused_naming_the_field() {
    let custom = BASE.replacen("model = \"gpt-4o\"", "model = \"our-fine-tune\"", 1);
    let priced = |price: &str| custom.replacen("our-fine-tune\"", &format!("our-fine-tune\"\nprice = {price}"), 1);
    let config = parse(&priced("{ input = 2.5, output = 10 }")).unwrap();
    let price = config.deployments[0].price.unwrap();
    assert_eq!((price.input, price.cached_input, price.output), (2.5, 2.5, 10.0), "cached input defaults to input");
    assert_eq!(price.reasoning, 10.0, "reasoning defaults to output");
    let config = parse(&priced("{ input = 2.5, cached_input = 1.25, output = 10, reasoning = 12 }")).unwrap();
    let price = config.deployments[0].price.unwrap();
    assert_eq!((price.cached_input, price.reasoning), (1.25, 12.0));
    assert!(parse(&custom).unwrap().deployments[0].price.is_none(), "a model without a preset is unpriced");
    for (price, field) in [
        ("{ input = -1, output = 10 }", "deployments[0].price.input"),
        ("{ input = 1, output = 1e9 }", "deployments[0].price.output"),
        ("{ input = 1, output = nan }", "deployments[0].price.output"),
        ("{ input = 1, output = 1, cached_input = -0.5 }", "deployments[0].price.cached_input"),
        ("{ input = 1, output = 1, reasoning = inf }", "deployments[0].price.reasoning"),
    ] {
        let err = parse(&priced(price)).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(12)), "{price}: {err}");
        assert!(err.message.contains("price per 1M tokens"), "{err}");
    }
    assert!(parse(&priced("{ input = 1, output = 1, writes = 2 }")).is_err(), "unknown fields are refused");
    let err = parse(&priced("{ input = 1 }")).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("deployments[0].price.output", Some(12)), "{err}");
    assert!(err.message.contains("no preset price for model `our-fine-tune`"), "{err}");
}

#[test]
fn a_known_model_gets_its_preset_and_config_overrides_it_field_by_field() {
    let price = parse(BASE).unwrap().deployments[0].price.unwrap();
    assert_eq!((price.input, price.cached_input, price.output, price.reasoning), (2.5, 1.25, 10.0, 10.0));
    let priced = |price: &str| BASE.replacen("model = \"gpt-4o\"", &format!("model = \"gpt-4o\"\nprice = {price}"), 1);
    let price = parse(&priced("{ output = 12 }")).unwrap().deployments[0].price.unwrap();
    assert_eq!((price.input, price.cached_input, price.output, price.reasoning), (2.5, 1.25, 12.0, 12.0));
    let price = parse(&priced("{ input = 3 }")).unwrap().deployments[0].price.unwrap();
    assert_eq!((price.input, price.cached_input, price.output), (3.0, 3.0, 10.0), "a set input sets the cached price");
    let price = parse(&priced("{ cached_input = 0 }")).unwrap().deployments[0].price.unwrap();
    assert_eq!((price.input, price.cached_input), (2.5, 0.0));
}

#[test]
fn the_currency_is_configurable_and_presets_apply_only_in_usd() {
    let config = parse(BASE).unwrap();
    assert_eq!(&*config.pricing.currency, "USD");
    let euros = format!("{BASE}\n[pricing]\ncurrency = \"EUR\"\n");
    let config = parse(&euros).unwrap();
    assert_eq!(&*config.pricing.currency, "EUR");
    assert!(config.deployments[0].price.is_none(), "a USD list price is no EUR price");
    let err = parse(&format!("{BASE}\n[pricing]\ncurrency = \"euro\"\n")).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("pricing.currency", Some(27)), "{err}");
}

#[test]
fn usage_retention_and_flush_interval_default_and_are_bounded() {
    let usage = parse(BASE).unwrap().usage;
    assert_eq!((usage.retention_days, usage.flush_interval), (400, Duration::from_secs(1)));
    let set = parse(&format!("{BASE}\n[usage]\nretention_days = 30\nflush_interval = \"250ms\"\n")).unwrap().usage;
    assert_eq!((set.retention_days, set.flush_interval), (30, Duration::from_millis(250)));
    for (section, field) in [
        ("retention_days = 0", "usage.retention_days"),
        ("retention_days = 100000", "usage.retention_days"),
        ("flush_interval = \"10ms\"", "usage.flush_interval"),
        ("flush_interval = \"1h\"", "usage.flush_interval"),
    ] {
        let err = parse(&format!("{BASE}\n[usage]\n{section}\n")).unwrap_err();
        assert_eq!((err.field.as_str(), err.line), (field, Some(27)), "{section}: {err}");
    }
}

#[test]
fn soft_budget_settings_are_read_and_bad_ones_name_their_field_and_line() {
    let config = parse(BASE).unwrap();
    assert!(config.budgets.warn_at.is_empty(), "no warnings unless asked for");
    assert_eq!(config.budgets.check_interval, Duration::from_secs(5));
    let soft = "\n[budgets]\nwarn_at = [0.8, 1.0]\nwebhook_url = \"https://hooks.example/budget?t=1\"\ncheck_interval = \"1s\"\n";
    let config = parse(&format!("{BASE}{soft}")).unwrap();
    assert_eq!(config.budgets.warn_at, [0.8, 1.0]);
    assert_eq!(config.budgets.webhook_url.as_deref(), Some("https://hooks.example/budget?t=1"));
    assert_eq!(config.budgets.check_interval, Duration::from_secs(1));
    let line = format!("{BASE}\n[budgets]\n").lines().count() + 1;
    for (bad, field) in [
        ("warn_at = [1.0, 0.8]", "budgets.warn_at"),
        ("warn_at = [0.0]", "budgets.warn_at"),
        ("warn_at = [1.5]", "budgets.warn_at"),
        ("webhook_url = \"ftp://hooks.example\"", "budgets.webhook_url"),
        ("webhook_url = \"https://\"", "budgets.webhook_url"),
        ("check_interval = \"soon\"", "budgets.check_interval"),
    ] {
        let error = parse(&format!("{BASE}\n[budgets]\n{bad}\n")).unwrap_err();
        assert_eq!((error.field.as_str(), error.line), (field, Some(line)), "{bad}: {error}");
    }
}
