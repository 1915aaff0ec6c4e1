//! Names as Prometheus' OTLP translation gives them (OTel's Prometheus compatibility rules,
//! which Prometheus' OTLP receiver and the Collector's Prometheus exporters apply), so the
//! same rules and dashboards serve metrics scraped here and metrics sent over OTLP.

/// An OTLP metric's type, as the translation tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A monotonic sum: a Prometheus counter, `_total` on its name.
    Counter,
    /// An OTLP gauge: `ratio` on its name when its unit is `1`.
    Gauge,
    /// A sum that can go down: a Prometheus gauge.
    UpDown,
}

/// The sample name: the OTLP name's words joined by `_`, the unit's words after them (a
/// unit in braces, such as `{task}`, adds nothing), `total` last on counters.
pub(crate) fn metric(name: &str, unit: &str, kind: Kind) -> String {
    let mut words: Vec<String> = name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect();
    let (main, per) = unit.split_once('/').unwrap_or((unit, ""));
    if let Some(u) = unit_word(main, main_unit).filter(|u| !words.contains(u)) {
        words.push(u);
    }
    if let Some(u) = unit_word(per, per_unit) {
        words.push(format!("per_{u}"));
    }
    let mut last = |w: &str| {
        words.retain(|x| x != w);
        words.push(w.into());
    };
    match kind {
        Kind::Counter => last("total"),
        Kind::Gauge if unit == "1" => last("ratio"),
        _ => {}
    }
    let out = words.join("_");
    match out.starts_with(|c: char| c.is_ascii_digit()) {
        true => format!("_{out}"),
        false => out,
    }
}

/// A label's name: characters Prometheus does not allow become `_`; a leading digit or a
/// single leading `_` gets `key` before it.
pub(crate) fn label(key: &str) -> String {
    let out: String = key
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '_' {
            true => c,
            false => '_',
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("key_{out}")
    } else if out.starts_with('_') && !out.starts_with("__") {
        format!("key{out}")
    } else {
        out
    }
}

/// A unit part's word, or None when it adds none (empty, or an annotation in braces).
fn unit_word(unit: &str, map: fn(&str) -> &str) -> Option<String> {
    let unit = unit.trim();
    if unit.is_empty() || unit.contains(['{', '}']) {
        return None;
    }
    let word: String = map(unit)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_");
    (!word.is_empty()).then_some(word)
}

fn main_unit(u: &str) -> &str {
    match u {
        "d" => "days",
        "h" => "hours",
        "min" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "By" => "bytes",
        "KiBy" => "kibibytes",
        "MiBy" => "mebibytes",
        "GiBy" => "gibibytes",
        "TiBy" => "tibibytes",
        "KBy" => "kilobytes",
        "MBy" => "megabytes",
        "GBy" => "gigabytes",
        "TBy" => "terabytes",
        "m" => "meters",
        "V" => "volts",
        "A" => "amperes",
        "J" => "joules",
        "W" => "watts",
        "g" => "grams",
        "Cel" => "celsius",
        "Hz" => "hertz",
        "%" => "percent",
        "1" => "",
        other => other,
    }
}

fn per_unit(u: &str) -> &str {
    match u {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use pipetrace_semconv::{attr, metric};

    use super::*;

    #[test]
    fn names_follow_prometheus_otlp_translation() {
        let m = metric;
        assert_eq!(
            m(metric::DISK_WAIT_TIME, "s", Kind::Counter),
            "pipetrace_process_disk_wait_time_seconds_total"
        );
        assert_eq!(
            m(metric::PROCESS_MEMORY_USAGE, "By", Kind::UpDown),
            "process_memory_usage_bytes"
        );
        assert_eq!(
            m(metric::OOM_KILLS, "{kill}", Kind::Counter),
            "pipetrace_process_oom_kills_total"
        );
        assert_eq!(
            m(metric::TASKS_RUNNING, "{task}", Kind::Gauge),
            "pipetrace_tasks_running"
        );
        // A unit already in the name is not repeated; `total` moves to the end.
        assert_eq!(m("a.seconds.total", "s", Kind::Counter), "a_seconds_total");
        assert_eq!(m("a.total.b", "", Kind::Counter), "a_b_total");
        assert_eq!(
            m("cpu.utilization", "1", Kind::Gauge),
            "cpu_utilization_ratio"
        );
        assert_eq!(m("x", "1", Kind::UpDown), "x");
        assert_eq!(
            m("net.rate", "By/s", Kind::Gauge),
            "net_rate_bytes_per_second"
        );
        assert_eq!(m("9lives", "", Kind::Gauge), "_9lives");
    }

    #[test]
    fn labels_follow_prometheus_otlp_translation() {
        assert_eq!(
            label(attr::CICD_PIPELINE_TASK_NAME),
            "cicd_pipeline_task_name"
        );
        assert_eq!(label(attr::HOST_NAME), "host_name");
        assert_eq!(label("0abc"), "key_0abc");
        assert_eq!(label("_x"), "key_x");
        assert_eq!(label("__x"), "__x");
    }
}
