//! The crate's vocabulary: the profiles it conforms to, its own terms, and how paths,
//! times, programs and languages become JSON-LD ids and values.
use serde_json::{Value, json};

use super::facts::Software;

/// pipetrace's own terms: a task's reads and writes its engine did not declare. (Under the
/// project's home, `repository` in Cargo.toml.)
pub const TERMS: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/terms#");
pub const UNDECLARED_INPUT: &str = "undeclaredInput";
pub const UNDECLARED_OUTPUT: &str = "undeclaredOutput";

pub const PROFILES: [(&str, &str, &str); 4] = [
    (
        "https://w3id.org/ro/wfrun/process/0.5",
        "Process Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/ro/wfrun/workflow/0.5",
        "Workflow Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/ro/wfrun/provenance/0.5",
        "Provenance Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
        "Workflow RO-Crate",
        "1.0",
    ),
];

/// The workflow language, as Workflow RO-Crate names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Snakemake,
    Cwl,
}

impl Language {
    pub(crate) fn entity(self) -> Value {
        let (id, name, url) = match self {
            Language::Snakemake => (
                "https://w3id.org/workflowhub/workflow-ro-crate#snakemake",
                "Snakemake",
                "https://snakemake.readthedocs.io",
            ),
            Language::Cwl => (
                "https://w3id.org/workflowhub/workflow-ro-crate#cwl",
                "Common Workflow Language",
                "https://www.commonwl.org/",
            ),
        };
        json!({"@id": id, "@type": "ComputerLanguage", "name": name, "url": {"@id": url}})
    }
}

/// A path as a crate id: relative inside the crate, a `file://` URI outside; percent-encoded.
pub(crate) fn file_id(path: &str) -> String {
    let enc: String = (path.bytes())
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    if path.starts_with('/') {
        format!("file://{enc}")
    } else {
        enc
    }
}

/// The id of a file gone at the end: a local id naming its path.
pub(crate) fn gone_id(path: &str) -> String {
    let id = file_id(path);
    format!("#gone:{}", id.strip_prefix("file://").unwrap_or(&id))
}

/// One id, or several: RO-Crate 1.1 wants no single-element arrays.
pub(crate) fn refs<I: IntoIterator<Item = String>>(ids: I) -> Option<Value> {
    let mut v: Vec<Value> = ids.into_iter().map(|id| json!({"@id": id})).collect();
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Value::Array(v)),
    }
}

pub(crate) fn set(node: &mut Value, key: &str, value: Option<Value>) {
    if let (Some(v), Some(m)) = (value, node.as_object_mut()) {
        m.insert(key.to_string(), v);
    }
}

/// Unix nanoseconds as ISO 8601 with milliseconds and an offset, as the profile's pattern
/// wants them (`2024-05-01T10:00:00.123+00:00`).
pub(crate) fn iso(nanos: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(nanos / 1_000_000);
    let s = humantime::format_rfc3339_millis(t).to_string();
    s.trim_end_matches('Z').to_string() + "+00:00"
}

pub(crate) fn status(error: &Option<String>) -> &'static str {
    match error {
        Some(_) => "http://schema.org/FailedActionStatus",
        None => "http://schema.org/CompletedActionStatus",
    }
}

pub(crate) fn slug(s: &str) -> String {
    (s.chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A program's id: an absolute web address where its package is known (the package's page,
/// with the program's path as the fragment: one package holds several programs), as the
/// Process Run Crate recommends; else its path as a `file://` URI.
pub(crate) fn program_id(s: &Software) -> String {
    match &s.package {
        Some(p) => format!(
            "{}#{}",
            p.url,
            file_id(&s.path).trim_start_matches("file://")
        ),
        None => file_id(&s.path),
    }
}

pub(crate) fn software_entity(s: &Software, name: &str, home: Option<&str>) -> Value {
    let url = match (&s.package, home) {
        (_, Some(home)) => home.to_string(),
        (Some(p), None) => p.url.clone(),
        (None, None) => file_id(&s.path),
    };
    let mut node = json!({
        "@id": program_id(s),
        "@type": "SoftwareApplication",
        "name": name,
        "url": url,
        "identifier": s.path,
    });
    set(
        &mut node,
        "softwareVersion",
        (s.package.as_ref()).map(|p| json!(p.version)),
    );
    node
}

pub(crate) fn license_id(license: &str) -> String {
    if license.starts_with("http://") || license.starts_with("https://") {
        license.to_string()
    } else {
        format!("https://spdx.org/licenses/{license}")
    }
}

pub(crate) fn engine_home(engine: &str) -> Option<&'static str> {
    match engine {
        e if e.contains("snakemake") => Some("https://snakemake.github.io"),
        e if e.contains("cwltool") => Some("https://github.com/common-workflow-language/cwltool"),
        e if e.contains("nextflow") => Some("https://www.nextflow.io"),
        _ => None,
    }
}

/// A file's media type by its name alone (its contents are not read for it).
pub(crate) fn media_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map_or("", |(_, x)| x);
    match ext.to_ascii_lowercase().as_str() {
        "txt" | "log" | "fa" | "fasta" | "fq" | "fastq" | "sam" | "vcf" | "bed" | "tsv" | "csv"
        | "sha256" | "md5" => "text/plain",
        "py" => "text/x-python",
        "sh" => "application/x-sh",
        "json" => "application/json",
        "yml" | "yaml" | "cwl" => "application/yaml",
        "md" => "text/markdown",
        "html" => "text/html",
        "gz" => "application/gzip",
        _ if name == "Snakefile" || ext == "smk" => "text/x-python",
        _ => "application/octet-stream",
    }
}
