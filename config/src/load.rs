//! Layering: defaults < YAML file < environment (OTEL_* < PIPETRACE_*) < command-line
//! flags, then validation. An error names what set the key at fault: the file, the
//! environment variable or the flag.
use std::path::{Path, PathBuf};

use figment::{
    Figment,
    providers::{Format, Serialized, Yaml},
};
use serde::Serialize;

pub use crate::error::ConfigError;
use crate::{
    export::Protocol,
    layer::{Layer, from_figment},
    model::Config,
};

/// Settings given as command-line flags: the top layer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Flags {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<PathBuf>,
}

impl Flags {
    /// Only the flags given, so that an absent flag hides nothing below it. Each is named
    /// as the command line spells it, for errors.
    fn layer(&self) -> Layer {
        let mut layer = Layer::new("command-line flags");
        let flag = |name: &str| format!("flag {name}");
        // The keys never nest one inside another: setting cannot fail.
        if let Some(s) = &self.service_name {
            layer.set(&["service_name"], s.clone().into(), flag("--service-name"));
        }
        if let Some(e) = &self.endpoint {
            let key = ["export", "otlp", "endpoint"];
            layer.set(&key, e.clone().into(), flag("--endpoint"));
        }
        if let Some(p) = self.protocol {
            let v = serde_json::to_value(p).expect("enum serialises");
            layer.set(&["export", "otlp", "protocol"], v, flag("--protocol"));
        }
        if let Some(o) = &self.output {
            let v = o.display().to_string().into();
            layer.set(&["export", "file"], v, flag("--output"));
        }
        layer
    }
}

/// Loads the layered configuration: the file, then the process environment (OTEL_*, then
/// PIPETRACE_* read by figment's Env), then the flags.
pub fn load(file: Option<&Path>, flags: &Flags) -> Result<Config, ConfigError> {
    let fig = layered(file, flags)?;
    let cfg: Config = fig.extract().map_err(|e| from_figment(e, &fig))?;
    crate::checks::validate(&cfg, &fig)?;
    Ok(cfg)
}

/// The layers merged, not yet extracted: each value still knows what set it.
pub(crate) fn layered(file: Option<&Path>, flags: &Flags) -> Result<Figment, ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(path) = file {
        refuse_writable_by_others(path)?;
        // Read here first, so that a file that cannot be read says which flag gave it.
        std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            message: format!("{e}; check the path given to --config (or PIPETRACE_CONFIG)"),
        })?;
        fig = fig.merge(Yaml::file_exact(path));
    }
    // Read lossily, as figment's Env reads: std::env::vars panics on a name not in UTF-8.
    let vars: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect();
    // PIPETRACE_ over OTEL_: pipetrace's own name for a key is the more specific one.
    Ok((fig.merge(crate::env::otel(&vars)))
        .merge(crate::env::pipetrace()?)
        .merge(crate::env::maps(&vars))
        .merge(flags.layer()))
}

/// The config decides what runs with the agent's privileges and where telemetry goes: a
/// file that other users may change (by its mode, or as its owner) is refused.
fn refuse_writable_by_others(path: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(()); // reading it says what is wrong
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(ConfigError::File {
            path: path.display().to_string(),
            message: format!(
                "is writable by other users (mode {mode:03o}); it decides where telemetry goes \
                 and the agent runs as root: chmod go-w {}",
                path.display()
            ),
        });
    }
    // Its owner may change it whatever its mode: root's, this user's, or (under sudo) the
    // file of the user who ran sudo, who can run pipetrace as root anyway, are trusted.
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let sudoer = std::env::var("SUDO_UID")
        .ok()
        .and_then(|u| u.parse::<u32>().ok());
    if meta.uid() != 0 && meta.uid() != me && Some(meta.uid()) != sudoer {
        return Err(ConfigError::File {
            path: path.display().to_string(),
            message: format!(
                "is owned by user {}, who may change it, not by root or by you (user {me}); it \
                 decides what runs with pipetrace's privileges and where telemetry goes: \
                 chown {me} {}",
                meta.uid(),
                path.display()
            ),
        });
    }
    Ok(())
}

/// The defaults as YAML, for `pipetrace config print-default`.
pub fn default_yaml() -> String {
    let value = serde_yaml::to_value(Config::default()).expect("the default config serialises");
    crate::docs::commented(&value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        export::Compression,
        testing::{file, load_with},
    };

    #[test]
    fn a_config_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let f = file("export:\n  batch_spans: 10\n");
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("writable by other users") && err.contains("chmod go-w"),
            "{err}"
        );
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(load_with(Some(f.path()), &[], &Flags::default()).is_ok());
    }

    #[test]
    fn a_config_another_user_owns_is_refused() {
        use std::os::unix::fs::MetadataExt;
        let f = file("export:\n  batch_spans: 10\n");
        assert!(
            load_with(Some(f.path()), &[], &Flags::default()).is_ok(),
            "mine"
        );
        let nobody = 65534;
        // Only root may give a file away; as another user, nothing to try.
        if std::os::unix::fs::chown(f.path(), Some(nobody), None).is_err() {
            assert_ne!(unsafe { libc::geteuid() }, 0, "root could not chown");
            return;
        }
        assert_eq!(std::fs::metadata(f.path()).unwrap().uid(), nobody);
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is owned by user 65534") && err.contains("chown 0 "),
            "{err}"
        );
    }

    fn traces_compression(c: &Config) -> Compression {
        let traces = c.export.otlp.resolve(crate::SignalKind::Traces);
        traces.expect("an endpoint").compression
    }

    #[test]
    fn layers_apply_in_order() {
        let f = file("export:\n  otlp:\n    endpoint: http://file:4317\n    compression: gzip\n");
        let only_file = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert_eq!(
            only_file.export.otlp.endpoint.as_deref(),
            Some("http://file:4317")
        );
        assert_eq!(traces_compression(&only_file), Compression::Gzip);

        let e = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317")];
        let with_env = load_with(Some(f.path()), &e, &Flags::default()).unwrap();
        assert_eq!(
            with_env.export.otlp.endpoint.as_deref(),
            Some("http://env:4317")
        );
        // The file's other keys survive the env layer.
        assert_eq!(traces_compression(&with_env), Compression::Gzip);

        let flags = Flags {
            endpoint: Some("http://flag:4317".into()),
            ..Default::default()
        };
        let with_flags = load_with(Some(f.path()), &e, &flags).unwrap();
        assert_eq!(
            with_flags.export.otlp.endpoint.as_deref(),
            Some("http://flag:4317")
        );
    }

    #[test]
    fn unknown_key_names_file_and_path() {
        let f = file("export:\n  otlp:\n    endpoit: http://x:4317\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        assert!(err.contains("export.otlp.endpoit"), "{err}");
        assert!(err.contains("did you mean `endpoint`?"), "{err}");
        let far = file("export:\n  otlp:\n    colour: blue\n");
        let err = load_with(Some(far.path()), &[], &Flags::default()).unwrap_err();
        assert!(!err.to_string().contains("did you mean"), "{err}");
        let e = [("PIPETRACE_METRICS__INTERVALL", "5s")];
        let err = load_with(None, &e, &Flags::default())
            .unwrap_err()
            .to_string();
        let head = "environment variable PIPETRACE_METRICS__INTERVALL: key `metrics.intervall`";
        assert!(err.starts_with(head), "{err}");
        assert!(err.contains("did you mean `interval`?"), "{err}");
    }

    #[test]
    fn a_value_and_a_section_in_the_environment_is_an_error_in_either_order() {
        let (a, b) = (
            ("PIPETRACE_EXPORT__OTLP", "x"),
            ("PIPETRACE_EXPORT__OTLP__ENDPOINT", "y"),
        );
        for vars in [[a, b], [b, a]] {
            let err = load_with(None, &vars, &Flags::default())
                .unwrap_err()
                .to_string();
            let head = "environment variables PIPETRACE_EXPORT__OTLP and \
                        PIPETRACE_EXPORT__OTLP__ENDPOINT: key `export.otlp`";
            assert!(err.starts_with(head), "{err}");
            assert!(err.ends_with("unset one of them"), "{err}");
        }
    }

    #[test]
    fn pipetrace_variables_override_otel_ones_and_empty_otel_ones_are_unset() {
        let (o, p) = (
            ("OTEL_SERVICE_NAME", "otel"),
            ("PIPETRACE_SERVICE_NAME", "own"),
        );
        for vars in [[o, p], [p, o]] {
            let c = load_with(None, &vars, &Flags::default()).unwrap();
            assert_eq!(c.service_name.as_deref(), Some("own"));
        }
        // The OTel specification: an empty variable is as if unset, so the file's stays.
        let f = file("service_name: file\nexport:\n  otlp:\n    endpoint: http://file:4317\n");
        let e = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_SERVICE_NAME", " "),
        ];
        let c = load_with(Some(f.path()), &e, &Flags::default()).unwrap();
        assert_eq!(c.export.otlp.endpoint.as_deref(), Some("http://file:4317"));
        assert_eq!(c.service_name.as_deref(), Some("file"));
    }

    #[test]
    fn bad_values_are_errors_with_the_key() {
        let f = file("export:\n  otlp:\n    protocol: carrier-pigeon\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("export.otlp.protocol"), "{err}");
        let f = file("probes:\n  scope_cgroup: libpod-abc\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("probes.scope_cgroup"), "{err}");
        assert!(err.contains("/proc/PID/cgroup"), "{err}");
        let f = file("probes:\n  ring_buffer_bytes: 1000\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("probes.ring_buffer_bytes"), "{err}");
        assert!(
            err.contains("(try 4096)"),
            "the nearest size that works: {err}"
        );
        let f = file("export:\n  flush_timeout: 3\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("write it as 500ms, 30s"), "an example: {err}");
        let vars = [("OTEL_EXPORTER_OTLP_HEADERS", "novalue")];
        let err = load_with(None, &vars, &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("OTEL_EXPORTER_OTLP_HEADERS") && err.contains("k1=v1,k2=v2"),
            "{err}"
        );
        let f = file("probes:\n  accumulator_entries: 0\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("probes.accumulator_entries"), "{err}");
        assert!(err.contains("try 65536"), "{err}");
        let f = file("export:\n  batch_spans: 0\n");
        let err = load_with(Some(f.path()), &[], &Flags::default()).unwrap_err();
        assert!(err.to_string().contains("`export.batch_spans`"), "{err}");
        let f = file("export:\n  batch_timeout: soon\n");
        let err = load_with(Some(f.path()), &[], &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("export.batch_timeout"), "{err}");
    }

    #[test]
    fn a_list_in_a_variable_without_brackets_says_how_to_write_one() {
        let var = [("PIPETRACE_ATTRIBUTION__ENGINES", "snakemake,cwl")];
        let err = load_with(None, &var, &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PIPETRACE_ATTRIBUTION__ENGINES='[a,b]'"),
            "{err}"
        );
        let var = [("PIPETRACE_ATTRIBUTION__ENGINES", "[snakemake,cwl]")];
        let cfg = load_with(None, &var, &Flags::default()).unwrap();
        assert_eq!(cfg.attribution.engines.unwrap(), ["snakemake", "cwl"]);
    }

    #[test]
    fn sizing_filters_layer_and_a_name_with_spaces_is_refused() {
        let f = file("sizing:\n  clouds: [aws]\n  regions: [us-east-1, 'us east']\n");
        let err = load_with(Some(f.path()), &[], &Flags::default()).unwrap_err();
        assert!(err.to_string().contains("`sizing.regions.1`"), "{err}");
        let f = file("sizing:\n  clouds: [aws, gcp]\n  instances: /t/mine.csv\n");
        let c = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert_eq!(c.sizing.clouds, ["aws", "gcp"]);
        assert_eq!(
            c.sizing.instances.as_deref(),
            Some(Path::new("/t/mine.csv"))
        );
    }

    #[test]
    fn file_capture_keys_layer_and_bad_globs_name_their_key() {
        let d = load_with(None, &[], &Flags::default()).unwrap();
        assert!(!d.files.enabled);
        let f = file("files:\n  enabled: true\n  exclude: ['**/*.tmp']\n");
        let c = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert!(c.files.enabled);
        assert_eq!(c.files.exclude, ["**/*.tmp"]);
        let e = [("PIPETRACE_FILES__MAX_PER_TOOL", "4")];
        let c = load_with(Some(f.path()), &e, &Flags::default()).unwrap();
        assert_eq!((c.files.max_per_tool, c.files.exclude.len()), (4, 1));
        for (yaml, key) in [
            ("files:\n  include: ['a/[b']\n", "files.include.0"),
            ("files:\n  exclude: ['ok', '{x']\n", "files.exclude.1"),
            ("files:\n  max_per_task: 0\n", "files.max_per_task"),
        ] {
            let f = file(yaml);
            let err = load_with(Some(f.path()), &[], &Flags::default()).unwrap_err();
            assert!(err.to_string().contains(key), "{yaml}: {err}");
        }
    }

    #[test]
    fn host_idle_keys_layer_and_are_checked() {
        let d = load_with(None, &[], &Flags::default()).unwrap();
        assert_eq!(d.host.idle_after, std::time::Duration::from_secs(3600));
        assert_eq!(d.host.idle_cpu_below, 0.1);
        let f = file("host:\n  idle_after: 30m\n  idle_cpu_below: 0.5\n");
        let c = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert_eq!(c.host.idle_after, std::time::Duration::from_secs(1800));
        assert_eq!(c.host.idle_cpu_below, 0.5);
        let e = [("PIPETRACE_HOST__IDLE_AFTER", "2h")];
        let c = load_with(Some(f.path()), &e, &Flags::default()).unwrap();
        assert_eq!(c.host.idle_after, std::time::Duration::from_secs(7200));
        assert_eq!(c.host.idle_cpu_below, 0.5, "the file's other key stays");
        for (yaml, key) in [
            ("host:\n  idle_after: 0s\n", "host.idle_after"),
            ("host:\n  idle_after: soon\n", "host.idle_after"),
            ("host:\n  idle_cpu_below: 0\n", "host.idle_cpu_below"),
            ("host:\n  idle_cpu_below: -1\n", "host.idle_cpu_below"),
            ("host:\n  idle_cpu_below: .nan\n", "host.idle_cpu_below"),
        ] {
            let f = file(yaml);
            let err = load_with(Some(f.path()), &[], &Flags::default());
            let err = err.unwrap_err().to_string();
            assert!(err.contains(key), "{yaml}: {err}");
        }
    }

    #[test]
    fn missing_file_is_an_error() {
        let err = load_with(
            Some(Path::new("/nonexistent/p.yaml")),
            &[],
            &Flags::default(),
        );
        assert!(err.unwrap_err().to_string().contains("/nonexistent/p.yaml"));
    }

    #[test]
    fn http_endpoint_gets_the_signal_path() {
        let e = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        let c = load_with(None, &e, &Flags::default()).unwrap();
        assert_eq!(
            c.export.otlp.traces_endpoint().as_deref(),
            Some("http://c:4318/v1/traces")
        );
        let e = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom")];
        let c = load_with(None, &e, &Flags::default()).unwrap();
        assert_eq!(
            c.export.otlp.traces_endpoint().as_deref(),
            Some("http://t:1/custom")
        );
    }

    #[test]
    fn default_yaml_round_trips() {
        let f = file(&default_yaml());
        let c = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert_eq!(c, Config::default());
    }
}
