//! Encoding a batch of tool spans into an OTLP trace request, two ways: as the sink did
//! (opentelemetry-proto's request built from the SDK's spans, then encoded by prost) and as
//! it does now (`export::otlp::encode`, protobuf written from the spans). Prints spans per
//! second of CPU for each and the bytes (the same).
//! `cargo bench -p pipetrace --bench encode [-- SPANS ROUNDS]`
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::{
    KeyValue,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::tonic as proto;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pipetrace_export::export::otlp::encode;
use prost::Message;

/// A tool span with the 30 attributes or so a real one carries.
fn span(i: u64) -> SpanData {
    let mut a = vec![
        KeyValue::new("pipetrace.tool.name", "samtools"),
        KeyValue::new("process.pid", 10_000 + i as i64),
        KeyValue::new("process.executable.path", "/usr/bin/samtools"),
        KeyValue::new(
            "process.command_line",
            format!("samtools sort -@ 2 -o sample{i}.bam sample{i}.unsorted.bam"),
        ),
        KeyValue::new("process.exit.code", 0_i64),
        KeyValue::new("cicd.pipeline.task.name", "sort"),
    ];
    for k in 0..12 {
        a.push(KeyValue::new(
            format!("pipetrace.figure.{k}"),
            k as f64 * 0.123,
        ));
        a.push(KeyValue::new(
            format!("pipetrace.count.{k}"),
            k * 4096 + i as i64,
        ));
    }
    let now = SystemTime::now();
    SpanData {
        span_context: SpanContext::new(
            TraceId::from(0x5eed_u128),
            SpanId::from(i + 2),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: SpanId::from(1),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: "samtools".into(),
        start_time: now,
        end_time: now,
        attributes: a,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Ok,
        instrumentation_scope: Default::default(),
    }
}

/// The request as the sink built it before: opentelemetry-proto's conversion, then prost.
fn through_the_sdk(spans: Vec<SpanData>, res: &ResourceAttributesWithSchema) -> Vec<u8> {
    let scope = spans.first().map(|s| s.instrumentation_scope.clone());
    let req = proto::collector::trace::v1::ExportTraceServiceRequest {
        resource_spans: vec![proto::trace::v1::ResourceSpans {
            resource: Some(proto::resource::v1::Resource {
                attributes: res.attributes.0.clone(),
                dropped_attributes_count: 0,
                entity_refs: vec![],
            }),
            scope_spans: vec![proto::trace::v1::ScopeSpans {
                schema_url: String::new(),
                scope: scope.map(|s| (&s, None).into()),
                spans: spans.into_iter().map(Into::into).collect(),
            }],
            schema_url: res.schema_url.clone().unwrap_or_default(),
        }],
    };
    req.encode_to_vec()
}

fn cpu_now() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (n, rounds) = (*args.first().unwrap_or(&512), *args.get(1).unwrap_or(&400));
    let res = ResourceAttributesWithSchema::from(
        &opentelemetry_sdk::Resource::builder_empty()
            .with_attributes([KeyValue::new("service.name", "pipetrace")])
            .build(),
    );
    let encoded = encode::Resource::encode(&res);
    let batch: Vec<SpanData> = (0..n).map(span).collect();
    assert_eq!(
        through_the_sdk(batch.clone(), &res),
        encode::trace_request(&batch, &encoded),
        "both ways give the same bytes"
    );
    // Each way gets its own copy of the batch per round, made outside the timing (the sink
    // owns its spans either way).
    let time = |f: &dyn Fn(Vec<SpanData>) -> usize| {
        let (mut cpu, mut bytes) = (Duration::ZERO, 0);
        for _ in 0..rounds {
            let copy = batch.clone();
            let t0 = cpu_now();
            bytes = f(copy);
            cpu += cpu_now() - t0;
        }
        ((n * rounds) as f64 / cpu.as_secs_f64(), bytes)
    };
    let wall = Instant::now();
    let (sdk, sdk_bytes) = time(&|b| through_the_sdk(b, &res).len());
    let (once, once_bytes) = time(&|b| encode::trace_request(&b, &encoded).len());
    println!(
        "encode: {n} tool spans a request, {rounds} requests each way ({:.1} s)",
        wall.elapsed().as_secs_f64()
    );
    println!("| way | spans per second of CPU | bytes a request |");
    println!("| --- | ---: | ---: |");
    println!("| opentelemetry-proto's request, then prost | {sdk:.0} | {sdk_bytes} |");
    println!("| protobuf from the spans (export::otlp::encode) | {once:.0} | {once_bytes} |");
    println!("speed-up: {:.2}x", once / sdk);
}
