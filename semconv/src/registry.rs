//! Reading the weaver-format registry (the subset of fields pipetrace uses) and rendering docs.
use serde::Deserialize;

pub const REGISTRY_YAML: &str = include_str!("../model/registry.yaml");

#[derive(Debug, Deserialize)]
pub struct Registry {
    pub groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
pub struct Group {
    pub id: String,
    pub r#type: String,
    pub brief: String,
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    pub metric_name: Option<String>,
    /// An event's name.
    pub name: Option<String>,
    pub instrument: Option<String>,
    pub unit: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Attribute {
    pub id: Option<String>,
    pub r#ref: Option<String>,
    pub r#type: Option<serde_yaml::Value>,
    pub stability: Option<String>,
    pub brief: Option<String>,
    pub examples: Option<serde_yaml::Value>,
}

impl Registry {
    pub fn embedded() -> Self {
        serde_yaml::from_str(REGISTRY_YAML).expect("semconv/model/registry.yaml parses")
    }

    pub fn attribute_ids(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .flat_map(|g| g.attributes.iter().filter_map(|a| a.id.as_deref()))
    }

    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "# pipetrace semantic conventions\n\n\
             Every attribute, event and metric name pipetrace emits, with its type and meaning: \
             for whoever queries, dashboards or alerts on pipetrace's data.\n\n\
             Generated from `semconv/model/registry.yaml` by \
             `cargo run -p pipetrace-semconv --bin semconv-docs`; do not edit.\n",
        );
        for g in &self.groups {
            out.push_str(&format!(
                "\n## `{}` ({})\n\n{}\n\n",
                g.id, g.r#type, g.brief
            ));
            if g.r#type == "metric" {
                out.push_str(&format!(
                    "Metric `{}`, {}, unit `{}`.\n\n",
                    g.metric_name.as_deref().unwrap_or(""),
                    g.instrument.as_deref().unwrap_or(""),
                    g.unit.as_deref().unwrap_or("")
                ));
            }
            if g.r#type == "event" {
                out.push_str(&format!(
                    "Span event `{}`.\n\n",
                    g.name.as_deref().unwrap_or("")
                ));
            }
            if matches!(g.r#type.as_str(), "span" | "metric" | "event") {
                out.push_str("Attributes: ");
                let refs: Vec<String> = g
                    .attributes
                    .iter()
                    .filter_map(|a| a.r#ref.as_deref())
                    .map(|r| format!("`{r}`"))
                    .collect();
                out.push_str(&refs.join(", "));
                out.push('\n');
                continue;
            }
            out.push_str("| Attribute | Type | Stability | Description | Examples |\n");
            out.push_str("|---|---|---|---|---|\n");
            for a in &g.attributes {
                let ty = a.r#type.as_ref().map(yaml_inline).unwrap_or_default();
                let ex = a.examples.as_ref().map(yaml_inline).unwrap_or_default();
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} | {} |\n",
                    a.id.as_deref().unwrap_or(""),
                    ty,
                    a.stability.as_deref().unwrap_or(""),
                    a.brief.as_deref().unwrap_or("").replace('|', "\\|"),
                    ex.replace('|', "\\|"),
                ));
            }
        }
        out
    }
}

fn yaml_inline(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .replace('\n', " "),
    }
}
