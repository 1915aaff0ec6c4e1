//! A layer of settings that remembers what set each one (an environment variable, a flag),
//! and the lookup that names the true source of any key in the merged config.
use std::sync::Arc;

use figment::{
    Figment, Metadata, Profile, Provider, Source,
    providers::Serialized,
    value::{Dict, Map, Value},
};
use serde_json::Map as Json;

use crate::ConfigError;

/// A setting's key path and what set it, e.g. `environment variable PIPETRACE_X__Y`.
pub(crate) type Origin = (Vec<String>, String);

/// Settings from one kind of source, each with its origin, as a figment provider.
#[derive(Clone, Debug)]
pub struct Layer {
    /// What the layer is, for a key no single origin explains: `environment`.
    kind: &'static str,
    root: Json<String, serde_json::Value>,
    origins: Vec<Origin>,
}

impl Layer {
    /// An empty layer merged over the YAML file (figment's global profile).
    pub(crate) fn new(kind: &'static str) -> Self {
        Layer {
            kind,
            root: Json::new(),
            origins: Vec::new(),
        }
    }

    /// Sets `path` to `value`, set by `origin`. False, and nothing set, when the path runs
    /// through a value or would replace a section: a setting is a value or a section.
    pub(crate) fn set(&mut self, path: &[&str], value: serde_json::Value, origin: String) -> bool {
        let set = insert(&mut self.root, path, value);
        if set {
            let path: Vec<String> = path.iter().map(|p| p.to_string()).collect();
            self.origins.retain(|(p, _)| *p != path);
            self.origins.push((path, origin));
        }
        set
    }

    /// The settings as one JSON object.
    #[cfg(test)]
    pub(crate) fn value(&self) -> serde_json::Value {
        serde_json::Value::Object(self.root.clone())
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let (kind, origins) = (self.kind, Arc::new(self.origins.clone()));
        Metadata::named(kind)
            .source(Source::Custom(kind.into()))
            .interpolater(move |_: &Profile, keys: &[&str]| {
                origin_of(&origins, keys).unwrap_or_else(|| kind.into())
            })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Serialized::globals(&self.root).data()
    }
}

/// Sets `path` in `root` unless a value or a section is in the way (see [`Layer::set`]).
fn insert(
    root: &mut Json<String, serde_json::Value>,
    path: &[&str],
    value: serde_json::Value,
) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = root;
    for p in parents {
        let next = node
            .entry(p.to_string())
            .or_insert_with(|| serde_json::Value::Object(Json::new()));
        let Some(section) = next.as_object_mut() else {
            return false;
        };
        node = section;
    }
    if node.get(*last).is_some_and(serde_json::Value::is_object) && !value.is_object() {
        return false;
    }
    node.insert(last.to_string(), value);
    true
}

/// What set `keys`: the setting holding it (a header inside OTEL_EXPORTER_OTLP_HEADERS), or
/// else every setting below it (a mistyped section names the variables under it).
pub(crate) fn origin_of(origins: &[Origin], keys: &[&str]) -> Option<String> {
    let along = |p: &[String]| p.iter().zip(keys).all(|(a, b)| a == b);
    if let Some((_, o)) = (origins.iter())
        .filter(|(p, _)| p.len() <= keys.len() && along(p))
        .max_by_key(|(p, _)| p.len())
    {
        return Some(o.clone());
    }
    let under: Vec<&str> = (origins.iter())
        .filter(|(p, _)| p.len() > keys.len() && along(p))
        .map(|(_, o)| o.as_str())
        .collect();
    (!under.is_empty()).then(|| under.join(", "))
}

/// The deepest value along `path`. A map key may hold dots itself (`cost.prices.m5.large`)
/// and an array is indexed by number (`redaction.patterns.0`).
fn deepest<'a>(root: &'a Value, path: &[String]) -> &'a Value {
    let (mut node, mut rest) = (root, path);
    'walk: while !rest.is_empty() {
        for n in 1..=rest.len() {
            let key = rest[..n].join(".");
            let next = match node {
                Value::Dict(_, d) => d.get(&key),
                Value::Array(_, a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            };
            if let Some(next) = next {
                (node, rest) = (next, &rest[n..]);
                continue 'walk;
            }
        }
        break;
    }
    node
}

/// How a provider is named in an error: a file by its path, a [`Layer`] by the variable or
/// flag that set the key, anything else is the built-in defaults.
pub(crate) fn describe(md: &Metadata, profile: &Profile, path: &[String]) -> String {
    match &md.source {
        Some(Source::File(p)) => p.display().to_string(),
        Some(Source::Custom(_)) => md.interpolate(profile, path),
        _ => "defaults".into(),
    }
}

/// The true source of the value at `path` in the merged config. figment tags every value
/// with the provider it came from: a leaf's tag is exact, a section's is the last layer
/// that touched it, so the walk goes as deep as the path exists.
pub(crate) fn source_of(fig: &Figment, path: &[String]) -> Option<String> {
    let root = fig.find_value("").ok()?;
    let md = fig.get_metadata(deepest(&root, path).tag())?;
    Some(describe(md, fig.profile(), path))
}

/// One line naming the source that set the key at fault (a file, an environment variable,
/// a flag), the key, and what is wrong, with the nearest valid key for a typo.
pub(crate) fn from_figment(e: figment::Error, fig: &Figment) -> ConfigError {
    let mut path = e.path.clone();
    // figment's path ends at the section holding an unknown key; the key itself is the
    // value whose provider is to blame.
    if let figment::error::Kind::UnknownField(name, _) = &e.kind
        && path.last() != Some(name)
    {
        path.push(name.clone());
    }
    // A file that does not parse has no values to look at, only the error's own provider.
    let source_name = (source_of(fig, &path))
        .or_else(|| (e.metadata.as_ref()).map(|md| describe(md, fig.profile(), &path)))
        .unwrap_or_else(|| "config".into());
    let mut message = e.kind.to_string();
    if path.is_empty() && matches!(e.kind, figment::error::Kind::Message(_)) {
        return ConfigError::Malformed {
            source_name,
            message: format!(
                "not valid YAML: {message}; mend the file there (`pipetrace config validate \
                 FILE` checks it)"
            ),
        };
    }
    if let figment::error::Kind::UnknownField(name, expected) = &e.kind
        && let Some(near) = nearest(name, expected)
    {
        message = format!("{message}; did you mean `{near}`?");
    }
    // A variable holds text: a list in it is written as figment reads one.
    if let figment::error::Kind::InvalidType(_, expected) = &e.kind
        && expected.contains("sequence")
        && let Some(var) = source_name.strip_prefix("environment variable ")
    {
        message = format!("{message}; write a list in brackets: {var}='[a,b]'");
    }
    if let Some(example) = example_of(&e.kind) {
        message = format!("{message}; {example}");
    }
    ConfigError::Invalid {
        source_name,
        key: path.join("."),
        message,
    }
}

/// How a value of the kind expected is written, where the parser's words do not show it.
fn example_of(kind: &figment::error::Kind) -> Option<&'static str> {
    use figment::error::Kind;
    let expected = match kind {
        Kind::InvalidType(_, e) | Kind::InvalidValue(_, e) => e.as_str(),
        _ => return None,
    };
    Some(match expected {
        e if e.contains("duration") => "write it as 500ms, 30s, 5m or 1h30m",
        e if e.contains("map") => "write it as key: value lines (in a variable, k1=v1,k2=v2)",
        _ => return None,
    })
}

/// The valid key closest to a mistyped one, if any is close (a typo, not another word).
pub(crate) fn nearest<'a>(typed: &str, valid: &[&'a str]) -> Option<&'a str> {
    let (best, distance) = (valid.iter())
        .map(|v| (*v, strsim::damerau_levenshtein(typed, v)))
        .min_by_key(|(_, d)| *d)?;
    (distance <= 2.max(typed.len() / 4)).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer() -> Layer {
        let mut l = Layer::new("environment");
        let var = |v: &str| format!("environment variable {v}");
        let headers = serde_json::json!({ "api-key": "x" });
        assert!(l.set(&["export", "otlp", "headers"], headers, var("H")));
        assert!(l.set(&["metrix", "a"], 1.into(), var("A")));
        assert!(l.set(&["metrix", "b"], 2.into(), var("B")));
        l
    }

    #[test]
    fn a_key_is_named_by_the_setting_holding_it_or_the_ones_below_it() {
        let o = &layer().origins;
        let at = |keys: &[&str]| origin_of(o, keys);
        assert_eq!(
            at(&["export", "otlp", "headers", "api-key"]).unwrap(),
            "environment variable H"
        );
        assert_eq!(
            at(&["export", "otlp", "headers"]).unwrap(),
            "environment variable H"
        );
        let both = "environment variable A, environment variable B";
        assert_eq!(at(&["metrix"]).unwrap(), both);
        assert_eq!(at(&["other"]), None);
        let md = layer().metadata();
        assert_eq!(md.interpolate(&Profile::Global, &["other"]), "environment");
    }

    #[test]
    fn the_walk_follows_dotted_map_keys_and_array_indices() {
        let fig = Figment::from(Serialized::defaults(serde_json::json!({
            "prices": { "m5.large": { "cpu": 1 } },
            "patterns": ["a", "b"],
        })));
        let root = fig.find_value("").unwrap();
        let path = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
        let found = deepest(&root, &path("prices.m5.large.cpu"));
        assert_eq!(found.to_u128(), Some(1));
        assert_eq!(deepest(&root, &path("patterns.1")).as_str(), Some("b"));
        assert!(deepest(&root, &path("patterns.7")).as_array().is_some());
    }
}

/// What set a key, named in the errors of a whole load.
#[cfg(test)]
mod named {
    use crate::{
        Flags, Protocol,
        testing::{file, load_with},
    };

    /// Variables set, flags given, and how the error begins.
    type Case<'a> = (&'a [(&'a str, &'a str)], Flags, &'a str);

    #[test]
    fn errors_name_the_variable_or_flag_that_set_the_key() {
        let f = file("export:\n  otlp:\n    endpoint: http://file:4317\n");
        let cases: [Case; 5] = [
            (
                &[("PIPETRACE_EXPORT__BATCH_SPANS", "lots")],
                Flags::default(),
                "environment variable PIPETRACE_EXPORT__BATCH_SPANS: key `export.batch_spans`",
            ),
            (
                &[("PIPETRACE_PROBES__RING_BUFFER_BYTES", "1000")],
                Flags::default(),
                "environment variable PIPETRACE_PROBES__RING_BUFFER_BYTES: key `probes.",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")],
                Flags::default(),
                "environment variable OTEL_EXPORTER_OTLP_ENDPOINT: key `export.otlp.endpoint`",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317")],
                Flags {
                    endpoint: Some("tempo:4317".into()),
                    ..Default::default()
                },
                "flag --endpoint: key `export.otlp.endpoint`",
            ),
            (
                &[("PIPETRACE_METRIX__INTERVAL", "5s")],
                Flags::default(),
                "environment variable PIPETRACE_METRIX__INTERVAL: key `metrix`",
            ),
        ];
        for (vars, flags, head) in cases {
            let err = load_with(Some(f.path()), vars, &flags).unwrap_err();
            assert!(err.to_string().starts_with(head), "{err}");
        }
        let e = [("PIPETRACE_METRIX__INTERVAL", "5s")];
        let err = load_with(None, &e, &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("did you mean `metrics`?"), "{err}");
        let e = [("PIPETRACE_EXPORT__BATCH_SPANS", "0")];
        let err = load_with(None, &e, &Flags::default())
            .unwrap_err()
            .to_string();
        let head = "environment variable PIPETRACE_EXPORT__BATCH_SPANS: key `export.batch_spans`";
        assert!(err.starts_with(head), "{err}");
    }

    /// figment tags a section with the last layer that touched it: the file's typo inside a
    /// section the environment also sets is still the file's.
    #[test]
    fn a_typo_in_the_file_is_the_files_beside_an_environment_in_the_same_section() {
        let f = file("export:\n  otlp:\n    endpoit: http://x:4317\n");
        let e = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317"),
            ("PIPETRACE_EXPORT__OTLP__COMPRESSION", "gzip"),
        ];
        let flags = Flags {
            protocol: Some(Protocol::Grpc),
            ..Default::default()
        };
        let err = load_with(Some(f.path()), &e, &flags)
            .unwrap_err()
            .to_string();
        let head = format!("{}: key `export.otlp.endpoit`", f.path().display());
        assert!(err.starts_with(&head), "{err}");
        assert!(err.contains("did you mean `endpoint`?"), "{err}");
        let f = file("cost:\n  prices:\n    m5.large: { cpu_hour: -1, gib_hour: 1 }\n");
        let err = load_with(Some(f.path()), &[], &Flags::default()).unwrap_err();
        let head = format!("{}: key `cost.prices.m5.large`", f.path().display());
        assert!(err.to_string().starts_with(&head), "{err}");
    }
}
