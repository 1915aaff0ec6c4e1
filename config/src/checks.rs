//! The checks types cannot make (ranges, addresses, patterns, settings that contradict
//! each other), run once the layers are merged; an error names what set the key at fault.
use figment::Figment;

use crate::{error::ConfigError, layer::source_of, model::Config};

/// Checks what types cannot say; an error names what set the key at fault.
pub(crate) fn validate(cfg: &Config, fig: &Figment) -> Result<(), ConfigError> {
    let checks: [fn(&Config) -> Checked; 9] = [
        validate_probes,
        |c| validate_sizing(&c.sizing),
        validate_metrics,
        |c| validate_diagnosis(&c.diagnosis),
        validate_cost,
        |c| validate_host(&c.host).map_err(|(k, m)| (k.to_string(), m)),
        |c| validate_files(&c.files),
        validate_export,
        validate_patterns,
    ];
    checks
        .iter()
        .try_for_each(|check| check(cfg))
        .map_err(|(key, message)| {
            let path: Vec<String> = key.split('.').map(String::from).collect();
            ConfigError::Invalid {
                source_name: source_of(fig, &path).unwrap_or_else(|| "config".into()),
                key,
                message,
            }
        })
}

/// A check's verdict: the key at fault and what is wrong with it.
type Checked = Result<(), (String, String)>;

fn fail(key: &str, message: impl Into<String>) -> Checked {
    Err((key.to_string(), message.into()))
}

fn validate_probes(cfg: &Config) -> Checked {
    let rb = cfg.probes.ring_buffer_bytes;
    if !rb.is_power_of_two() || rb < 4096 {
        // The nearest that works, not the default: the user chose a size.
        let near = rb.checked_next_power_of_two().unwrap_or(1 << 31).max(4096);
        let why = format!("{rb} is not a power of two of at least 4096 (try {near})");
        return fail("probes.ring_buffer_bytes", why);
    }
    let entries = cfg.probes.accumulator_entries;
    if !(1..=1 << 22).contains(&entries) {
        let why = format!("{entries} is not between 1 and 4194304 (try 65536)");
        return fail("probes.accumulator_entries", why);
    }
    if let Some(scope) = &cfg.probes.scope_cgroup
        && scope != ".."
        && !(scope.starts_with('/') && scope.len() > 1)
    {
        return fail(
            "probes.scope_cgroup",
            format!(
                "`{scope}` is not a cgroup path below the root; give it as /proc/PID/cgroup \
                 shows it (e.g. /libpod_parent/libpod-<id>), `..` for the cgroup around the \
                 agent's own (its pod), or leave it unset for the whole node"
            ),
        );
    }
    Ok(())
}

fn validate_metrics(cfg: &Config) -> Checked {
    // The live sampler runs at this interval whether metrics are exported or not (stalls).
    if cfg.metrics.interval < std::time::Duration::from_millis(100) {
        return fail("metrics.interval", "must be at least 100ms (try 5s)");
    }
    if cfg.metrics.max_series == 0 {
        return fail("metrics.max_series", "must be at least 1 (try 1000)");
    }
    if cfg.diagnosis.slower_factor <= 1.0 {
        return fail("diagnosis.slower_factor", "must be above 1 (try 2)");
    }
    validate_prometheus(&cfg.metrics)
}

/// The verdicts' thresholds: shares and rates a verdict can meet, not negative or NaN.
fn validate_diagnosis(d: &crate::Diagnosis) -> Checked {
    let dflt = crate::Diagnosis::default();
    let above_0 = [
        ("cpu_bound", d.cpu_bound, dflt.cpu_bound),
        ("io_bound", d.io_bound, dflt.io_bound),
        ("memory_bound", d.memory_bound, dflt.memory_bound),
        ("gpu_bound", d.gpu_bound, dflt.gpu_bound),
    ];
    for (key, v, try_) in above_0 {
        if !(v.is_finite() && v > 0.0) {
            let why =
                format!("must be a number above 0, as it is met when at least this (try {try_})");
            return fail(&format!("diagnosis.{key}"), why);
        }
    }
    let shares = [
        ("idle_below", d.idle_below, dflt.idle_below),
        ("over_allocation", d.over_allocation, dflt.over_allocation),
        (
            "gpu_starved_below",
            d.gpu_starved_below,
            dflt.gpu_starved_below,
        ),
    ];
    for (key, v, try_) in shares {
        if !(0.0..=1.0).contains(&v) {
            let why = format!("must be a share from 0 to 1 (try {try_})");
            return fail(&format!("diagnosis.{key}"), why);
        }
    }
    if !(d.headroom.is_finite() && d.headroom >= 0.0) {
        let why = format!(
            "must be 0 or more: the share added to peaks (try {})",
            dflt.headroom
        );
        return fail("diagnosis.headroom", why);
    }
    Ok(())
}

fn validate_prometheus(m: &crate::Metrics) -> Checked {
    let Some(listen) = &m.prometheus.listen else {
        return Ok(());
    };
    if listen.parse::<std::net::SocketAddr>().is_err() {
        let why =
            format!("`{listen}` is not an address and port (try 127.0.0.1:9464 or [::]:9464)");
        return fail("metrics.prometheus.listen", why);
    }
    if !m.enabled {
        return fail(
            "metrics.prometheus.listen",
            "serves the metrics, which metrics.enabled: false turns off; enable them or unset it",
        );
    }
    Ok(())
}

fn validate_cost(cfg: &Config) -> Checked {
    let prices = &cfg.cost.prices;
    if let Some((host, _)) =
        (prices.iter()).find(|(_, p)| !(p.cpu_hour >= 0.0 && p.gib_hour >= 0.0))
    {
        return fail(
            &format!("cost.prices.{host}"),
            "prices must be numbers of at least 0",
        );
    }
    // Left unnamed, the host's detected instance type chooses the row at run time.
    if !prices.is_empty()
        && cfg.cost.host_type != crate::model::Cost::DEFAULT_HOST_TYPE
        && cfg.cost.price().is_none()
    {
        let rows: Vec<&str> = prices.keys().map(String::as_str).collect();
        let why = format!(
            "`{}` has no row in cost.prices (rows: {})",
            cfg.cost.host_type,
            rows.join(", ")
        );
        return fail("cost.host_type", why);
    }
    Ok(())
}

fn validate_export(cfg: &Config) -> Checked {
    let otlp = &cfg.export.otlp;
    for (key, ep) in [
        ("export.otlp.endpoint", &otlp.endpoint),
        ("export.otlp.traces.endpoint", &otlp.traces.endpoint),
        ("export.otlp.metrics.endpoint", &otlp.metrics.endpoint),
    ] {
        if let Some(ep) = ep
            && !(ep.starts_with("http://") || ep.starts_with("https://"))
        {
            return fail(key, format!("`{ep}` is not an http:// or https:// URL"));
        }
    }
    for (key, n) in [
        ("export.queue_spans", cfg.export.queue_spans),
        ("export.batch_spans", cfg.export.batch_spans),
    ] {
        if n == 0 {
            return fail(key, "must be above 0 (try the default, 200000 and 2048)");
        }
    }
    Ok(())
}

/// Every regex a user gave compiles.
fn validate_patterns(cfg: &Config) -> Checked {
    for (i, p) in cfg.redaction.patterns.iter().enumerate() {
        if let Err(e) = regex::Regex::new(p) {
            return fail(&format!("redaction.patterns.{i}"), e.to_string());
        }
    }
    for (list, rules) in [
        ("run_rules", &cfg.attribution.run_rules),
        ("task_rules", &cfg.attribution.task_rules),
    ] {
        for (i, r) in rules.iter().enumerate() {
            for (field, re) in [("argv", &r.matches.argv), ("cwd", &r.matches.cwd)] {
                if let Some(Err(e)) = re.as_deref().map(regex::Regex::new) {
                    return fail(
                        &format!("attribution.{list}.{i}.match.{field}"),
                        e.to_string(),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Host idle detection: a zero wait or a threshold no host can go below would make every
/// node idle at once or never.
fn validate_host(h: &crate::model::Host) -> Result<(), (&'static str, String)> {
    if h.idle_after < std::time::Duration::from_secs(1) {
        return Err((
            "host.idle_after",
            "must be at least 1s (try 1h: how long a node may sit unused before it is called idle)"
                .into(),
        ));
    }
    let below = h.idle_cpu_below;
    if !(below.is_finite() && below > 0.0) {
        return Err((
            "host.idle_cpu_below",
            format!("{below} is not a number of CPUs above 0 (try 0.1)"),
        ));
    }
    Ok(())
}

/// Cloud and region filters are names as the table spells them: one word each.
fn validate_sizing(s: &crate::model::Sizing) -> Checked {
    for (list, names) in [("clouds", &s.clouds), ("regions", &s.regions)] {
        let bad = |n: &String| {
            n.is_empty()
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        };
        if let Some((i, n)) = names.iter().enumerate().find(|(_, n)| bad(n)) {
            let why = format!(
                "`{n}` is not a {} name as the instance table writes it (e.g. {}): one word \
                 of letters, digits and dashes",
                &list[..list.len() - 1],
                if list == "clouds" {
                    "aws, gcp, azure"
                } else {
                    "us-east-1, europe-west4, eastus"
                }
            );
            return fail(&format!("sizing.{list}.{i}"), why);
        }
    }
    Ok(())
}

/// File capture: globs that compile, and room for at least one path.
fn validate_files(f: &crate::model::Files) -> Result<(), (String, String)> {
    for (list, globs) in [("include", &f.include), ("exclude", &f.exclude)] {
        for (i, g) in globs.iter().enumerate() {
            globset::Glob::new(g).map_err(|e| {
                let fix = "write a glob such as '**/*.bam' or '/scratch/**'";
                (format!("files.{list}.{i}"), format!("{e}; {fix}"))
            })?;
        }
    }
    for (key, n) in [
        ("max_per_tool", f.max_per_tool),
        ("max_per_task", f.max_per_task),
    ] {
        if n == 0 {
            let why = "must be above 0 (files.enabled: false turns capture off)";
            return Err((format!("files.{key}"), why.into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Flags, testing::load_with};

    #[test]
    fn thresholds_no_verdict_can_meet_are_refused_naming_a_value_that_works() {
        let refused = |var: &str, v: &str| {
            load_with(None, &[(var, v)], &Flags::default())
                .unwrap_err()
                .to_string()
        };
        let e = refused("PIPETRACE_DIAGNOSIS__CPU_BOUND", "-5");
        assert!(
            e.contains("key `diagnosis.cpu_bound`")
                && e.contains("above 0")
                && e.contains("try 0.7"),
            "{e}"
        );
        let e = refused("PIPETRACE_DIAGNOSIS__IDLE_BELOW", "1.5");
        assert!(
            e.contains("diagnosis.idle_below") && e.contains("from 0 to 1"),
            "{e}"
        );
        let e = refused("PIPETRACE_DIAGNOSIS__HEADROOM", "-0.1");
        assert!(e.contains("diagnosis.headroom"), "{e}");
        let ok = [("PIPETRACE_DIAGNOSIS__CPU_BOUND", "0.9")];
        assert!(load_with(None, &ok, &Flags::default()).is_ok());
    }
}
