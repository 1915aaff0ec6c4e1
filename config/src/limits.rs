//! OpenTelemetry's span and attribute limits, as the specification names them
//! (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, ...). Each key is
//! one variable; a span's own limit wins over the general one, as the specification says.
use serde::{Deserialize, Serialize};

/// The specification's default count limit (attributes, events, links).
pub const DEFAULT_COUNT: usize = 128;

/// As configured: null is "not set" (the general limit, else the specification's default).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: the longest string value; null: no limit.
    pub attribute_value_length: Option<usize>,
    /// OTEL_ATTRIBUTE_COUNT_LIMIT: attributes per span, event or link; null: 128.
    pub attribute_count: Option<usize>,
    /// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: over the general one, for spans.
    pub span_attribute_value_length: Option<usize>,
    /// OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT: over the general one, for spans.
    pub span_attribute_count: Option<usize>,
    /// OTEL_SPAN_EVENT_COUNT_LIMIT: events per span; null: 128.
    pub span_event_count: Option<usize>,
    /// OTEL_SPAN_LINK_COUNT_LIMIT: links per span; null: 128.
    pub span_link_count: Option<usize>,
    /// OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT: attributes per event, over the general one.
    pub event_attribute_count: Option<usize>,
    /// OTEL_LINK_ATTRIBUTE_COUNT_LIMIT: attributes per link, over the general one.
    pub link_attribute_count: Option<usize>,
}

/// The limits in force on exported spans, every precedence resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanLimits {
    /// Bytes of a string value (and of each string in an array) at most; None: no limit.
    pub value_length: Option<usize>,
    pub attributes: usize,
    pub events: usize,
    pub links: usize,
    pub event_attributes: usize,
    pub link_attributes: usize,
}

impl Default for SpanLimits {
    fn default() -> Self {
        Limits::default().span()
    }
}

impl Limits {
    /// The limits a span gets: its own where set, else the general ones, else the
    /// specification's defaults (no value length limit, 128 of each count).
    pub fn span(&self) -> SpanLimits {
        let count = |own: Option<usize>| own.or(self.attribute_count).unwrap_or(DEFAULT_COUNT);
        SpanLimits {
            value_length: self
                .span_attribute_value_length
                .or(self.attribute_value_length),
            attributes: count(self.span_attribute_count),
            events: self.span_event_count.unwrap_or(DEFAULT_COUNT),
            links: self.span_link_count.unwrap_or(DEFAULT_COUNT),
            event_attributes: count(self.event_attribute_count),
            link_attributes: count(self.link_attribute_count),
        }
    }
}

/// The OTEL_* variable of each key under `export.limits`.
pub const VARIABLES: [(&str, &str); 8] = [
    (
        "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        "attribute_value_length",
    ),
    ("OTEL_ATTRIBUTE_COUNT_LIMIT", "attribute_count"),
    (
        "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        "span_attribute_value_length",
    ),
    ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "span_attribute_count"),
    ("OTEL_SPAN_EVENT_COUNT_LIMIT", "span_event_count"),
    ("OTEL_SPAN_LINK_COUNT_LIMIT", "span_link_count"),
    ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "event_attribute_count"),
    ("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", "link_attribute_count"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spans_own_limit_wins_over_the_general_one_and_defaults_follow_the_spec() {
        let d = Limits::default().span();
        assert_eq!(d.value_length, None, "no value length limit by default");
        assert_eq!((d.attributes, d.events, d.links), (128, 128, 128));
        assert_eq!((d.event_attributes, d.link_attributes), (128, 128));
        let general = Limits {
            attribute_value_length: Some(2048),
            attribute_count: Some(10),
            ..Default::default()
        };
        let g = general.span();
        assert_eq!((g.value_length, g.attributes), (Some(2048), 10));
        assert_eq!(
            (g.event_attributes, g.link_attributes, g.events),
            (10, 10, 128)
        );
        let own = Limits {
            span_attribute_value_length: Some(100),
            span_attribute_count: Some(3),
            event_attribute_count: Some(4),
            span_event_count: Some(5),
            span_link_count: Some(0),
            ..general
        };
        let o = own.span();
        assert_eq!((o.value_length, o.attributes), (Some(100), 3));
        assert_eq!((o.event_attributes, o.link_attributes), (4, 10));
        assert_eq!((o.events, o.links), (5, 0));
    }
}
