//! OpenTelemetry's span and attribute limits (`export.limits`, OTEL_*_LIMIT), applied to each
//! span as it is encoded for export, so that the trace file and OTLP carry the same spans.
//! What passes a count is left out and counted in the span's (event's, link's) own dropped
//! counts, as OTLP has them; a string cut to the value length is cut at a UTF-8 character
//! boundary and its key listed in `pipetrace.attributes.truncated` beside it.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_config::SpanLimits;
use pipetrace_semconv::attr;

/// What the limits did, over every span exported.
#[derive(Debug, Default)]
pub struct LimitStats {
    /// String values cut to the value length.
    pub values_truncated: AtomicU64,
    /// Attributes of spans, events and links left out past their count.
    pub attributes_dropped: AtomicU64,
    pub events_dropped: AtomicU64,
    pub links_dropped: AtomicU64,
}

impl LimitStats {
    /// Attributes, events and links left out past their counts.
    pub fn dropped(&self) -> u64 {
        let n = |a: &AtomicU64| a.load(Relaxed);
        n(&self.attributes_dropped) + n(&self.events_dropped) + n(&self.links_dropped)
    }

    /// The run's last line about it, when the limits cut anything.
    pub fn describe(&self) -> Option<String> {
        let n = |a: &AtomicU64| a.load(Relaxed);
        let (cut, attrs) = (n(&self.values_truncated), n(&self.attributes_dropped));
        let (events, links) = (n(&self.events_dropped), n(&self.links_dropped));
        (cut + attrs + events + links > 0).then(|| {
            format!(
                "pipetrace: export.limits (OTEL_*_LIMIT) cut {cut} attribute values (listed in \
                 pipetrace.attributes.truncated) and left out {attrs} attributes, {events} \
                 events and {links} links (counted in each span's dropped counts)"
            )
        })
    }
}

/// The longest start of `s` that is at most `max` bytes and ends on a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Cuts one string value to `max` bytes; true when it was longer.
fn cut_string(v: &mut StringValue, max: usize) -> bool {
    let s = v.as_str();
    if s.len() <= max {
        return false;
    }
    *v = StringValue::from(cut(s, max).to_string());
    true
}

/// Cuts a string value, or each string of an array, to `max` bytes; true when any was cut.
fn cut_value(v: &mut Value, max: usize) -> bool {
    match v {
        Value::String(s) => cut_string(s, max),
        Value::Array(Array::String(items)) => {
            let mut any = false;
            for s in items {
                any |= cut_string(s, max);
            }
            any
        }
        _ => false,
    }
}

/// Bounds one attribute list to `count` attributes and its values to `length` bytes, and
/// marks what was cut. Returns (attributes left out, values cut).
fn limit_attributes(attrs: &mut Vec<KeyValue>, count: usize, length: Option<usize>) -> (u32, u32) {
    let mut dropped = attrs.len().saturating_sub(count);
    attrs.truncate(count);
    let mut cut_keys: Vec<StringValue> = Vec::new();
    if let Some(max) = length {
        for kv in attrs.iter_mut() {
            if cut_value(&mut kv.value, max) {
                cut_keys.push(kv.key.as_str().to_string().into());
            }
        }
    }
    let cut = cut_keys.len() as u32;
    // The mark takes one of the count's places: past the count, the last attribute yields.
    if cut > 0 && count > 0 {
        if attrs.len() == count {
            attrs.pop();
            dropped += 1;
        }
        let mut mark = Value::Array(Array::String(cut_keys));
        if let Some(max) = length {
            cut_value(&mut mark, max);
        }
        attrs.push(KeyValue::new(attr::ATTRIBUTES_TRUNCATED, mark));
    }
    (dropped as u32, cut)
}

/// Applies `limits` to one span, its events and its links, counting into `stats`.
pub(crate) fn apply(span: &mut SpanData, limits: &SpanLimits, stats: &LimitStats) {
    let len = limits.value_length;
    let (mut dropped, mut cut) = limit_attributes(&mut span.attributes, limits.attributes, len);
    span.dropped_attributes_count += dropped;
    let events = &mut span.events;
    let extra_events = events.events.len().saturating_sub(limits.events);
    events.events.truncate(limits.events);
    events.dropped_count += extra_events as u32;
    for e in &mut events.events {
        let (d, c) = limit_attributes(&mut e.attributes, limits.event_attributes, len);
        e.dropped_attributes_count += d;
        (dropped, cut) = (dropped + d, cut + c);
    }
    let links = &mut span.links;
    let extra_links = links.links.len().saturating_sub(limits.links);
    links.links.truncate(limits.links);
    links.dropped_count += extra_links as u32;
    for l in &mut links.links {
        let (d, c) = limit_attributes(&mut l.attributes, limits.link_attributes, len);
        l.dropped_attributes_count += d;
        (dropped, cut) = (dropped + d, cut + c);
    }
    stats.values_truncated.fetch_add(u64::from(cut), Relaxed);
    stats
        .attributes_dropped
        .fetch_add(u64::from(dropped), Relaxed);
    stats.events_dropped.fetch_add(extra_events as u64, Relaxed);
    stats.links_dropped.fetch_add(extra_links as u64, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_character_boundaries() {
        assert_eq!(cut("abcdef", 4), "abcd");
        assert_eq!(cut("abc", 4), "abc");
        // é is two bytes, 😀 four: never half a character.
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut("aé", 3), "aé");
        assert_eq!(cut("😀😀", 7), "😀");
        assert_eq!(cut("😀", 3), "");
        assert_eq!(cut("", 0), "");
    }

    fn kv(k: &str, v: impl Into<Value>) -> KeyValue {
        KeyValue::new(k.to_string(), v.into())
    }

    #[test]
    fn long_values_are_cut_and_marked_and_counts_drop_what_passes_them() {
        let mut attrs = vec![
            kv(attr::PROCESS_COMMAND_LINE, "x".repeat(4097)),
            kv(attr::PROCESS_PID, 7i64),
            kv(
                "files",
                Value::Array(Array::String(vec!["é".repeat(1100).into()])),
            ),
        ];
        let (dropped, cut) = limit_attributes(&mut attrs, 128, Some(2048));
        assert_eq!((dropped, cut), (0, 2));
        let cmd = attrs[0].value.as_str();
        assert_eq!(cmd.len(), 2048);
        match &attrs[2].value {
            Value::Array(Array::String(v)) => assert_eq!(v[0].as_str(), "é".repeat(1024)),
            other => panic!("{other:?}"),
        }
        let mark = attrs.last().unwrap();
        assert_eq!(mark.key.as_str(), attr::ATTRIBUTES_TRUNCATED);
        assert_eq!(
            mark.value,
            Value::Array(Array::String(vec![
                attr::PROCESS_COMMAND_LINE.into(),
                "files".into()
            ]))
        );
        // At the count, the mark takes the last attribute's place, counted as dropped.
        let mut attrs = vec![kv("a", "long value"), kv("b", 1i64), kv("c", 2i64)];
        let (dropped, cut) = limit_attributes(&mut attrs, 2, Some(4));
        assert_eq!((dropped, cut), (2, 1));
        let keys: Vec<&str> = attrs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["a", attr::ATTRIBUTES_TRUNCATED]);
        assert_eq!(attrs[0].value.as_str(), "long");
        // Nothing over the limits: nothing changes, no mark.
        let mut attrs = vec![kv("a", "short")];
        assert_eq!(limit_attributes(&mut attrs, 128, None), (0, 0));
        assert_eq!(attrs.len(), 1);
    }
}
