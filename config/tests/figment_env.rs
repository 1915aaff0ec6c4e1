//! pipetrace's PIPETRACE_* provider keys variables as figment's own `Env` does. A test
//! binary of its own with one test: it sets process environment variables, which no other
//! thread may read meanwhile.
use figment::{Figment, providers::Env};
use pipetrace_config::env::{is_config, pipetrace};

fn set(vars: &[(&str, &str)]) {
    for (k, v) in vars {
        // SAFETY: the only test in this binary; no other thread reads the environment.
        unsafe { std::env::set_var(k, v) };
    }
}

fn figments_env() -> serde_json::Value {
    let env = Env::prefixed("PIPETRACE_")
        .filter(|k| is_config(k.as_str()))
        .split("__");
    Figment::from(env).extract().expect("figment's Env")
}

#[test]
fn pipetrace_variables_are_keyed_as_figments_env_keys_them() {
    set(&[
        ("PIPETRACE_EXPORT__BATCH_SPANS", "64"),
        ("PIPETRACE_METRICS__ENABLED", "true"),
        ("PIPETRACE_HOST__IDLE_AFTER", "2h"),
        ("PIPETRACE_HOST__IDLE_CPU_BELOW", "0.5"),
        ("PIPETRACE_EXPORT__OTLP__HEADERS__X-SCOPE-ORGID", "Lab"),
        ("PIPETRACE_SERVICE_NAME", "lab"),
        ("PIPETRACE_LOG", "debug"),
        ("PIPETRACE_BIN", "/usr/bin/pipetrace"),
    ]);
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let ours = Figment::from(pipetrace(&vars).expect("no conflict"));
    let ours: serde_json::Value = ours.extract().expect("our layer");
    assert_eq!(ours, figments_env());
    assert_eq!(ours["export"]["otlp"]["headers"]["x-scope-orgid"], "Lab");
    assert!(ours.get("log").is_none() && ours.get("bin").is_none());

    // figment's Env keeps whichever of a value and a section below it comes last in the
    // environment, silently; ours refuses both and names them.
    set(&[("PIPETRACE_A__B", "x"), ("PIPETRACE_A__B__C", "y")]);
    let kept = figments_env()["a"]["b"].clone();
    assert!(kept == "x" || kept["c"] == "y", "{kept}");
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let err = pipetrace(&vars).expect_err("a conflict").to_string();
    assert!(
        err.contains("PIPETRACE_A__B and PIPETRACE_A__B__C"),
        "{err}"
    );
}
