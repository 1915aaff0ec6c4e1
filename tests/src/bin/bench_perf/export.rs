//! OTLP export alone: synthetic tool spans (the attributes a real one carries) through the
//! agent's own exporter to the independent rotel collector (another process, dropping what
//! it gets), timed by this process's CPU.
use std::{
    borrow::Cow,
    time::{Duration, Instant, SystemTime},
};

use opentelemetry::{
    InstrumentationScope, KeyValue,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pipetrace_core::judgement::Kind;
use pipetrace_export::{export::Sink, signals::ReadySpan};

fn span(i: u64, trace: TraceId) -> SpanData {
    let mut attrs = vec![
        KeyValue::new("pipetrace.kind", "tool"),
        KeyValue::new("pipetrace.tool.name", "samtools"),
        KeyValue::new("process.pid", 10_000 + i as i64),
        KeyValue::new("process.parent_pid", 9_999_i64),
        KeyValue::new("process.executable.path", "/usr/bin/samtools"),
        KeyValue::new(
            "process.command_line",
            format!("samtools sort -@ 2 -o sample{i}.bam sample{i}.unsorted.bam"),
        ),
        KeyValue::new("process.exit.code", 0_i64),
        KeyValue::new("cicd.pipeline.name", "variant-calling"),
        KeyValue::new("cicd.pipeline.task.name", "sort"),
        KeyValue::new("pipetrace.collection.mode", "ebpf"),
    ];
    for (k, v) in [
        "cpu.user_time",
        "cpu.system_time",
        "cpu.run_queue_delay",
        "disk.wait_time",
        "memory.wait_time",
    ]
    .iter()
    .zip(1..)
    {
        attrs.push(KeyValue::new(format!("pipetrace.{k}"), v as f64 * 0.123));
    }
    for (k, v) in [
        "memory.peak",
        "memory.maxrss",
        "memory.minor_faults",
        "memory.major_faults",
        "context_switches.voluntary",
        "context_switches.involuntary",
        "io.read_bytes",
        "io.write_bytes",
        "io.read_calls",
        "io.write_calls",
        "disk.read_bytes",
        "disk.write_bytes",
        "disk.cancelled_write_bytes",
        "network.transmit_bytes",
        "network.receive_bytes",
    ]
    .iter()
    .zip(1..)
    {
        attrs.push(KeyValue::new(format!("pipetrace.{k}"), v * 4096 + i as i64));
    }
    let now = SystemTime::now();
    SpanData {
        span_context: SpanContext::new(
            trace,
            SpanId::from(i + 1),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: SpanId::from(1),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed("samtools"),
        start_time: now - Duration::from_millis(200),
        end_time: now,
        attributes: attrs,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: InstrumentationScope::builder("pipetrace").build(),
    }
}

fn cpu_now() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Spans per second of this process's CPU, the spans and the wall time.
pub async fn throughput(n: u64) -> (f64, u64, Duration) {
    let port = pipetrace_e2e::receiver::free_port();
    let mut rotel = std::process::Command::new(pipetrace_e2e::rotel_agent())
        .args([
            "start",
            "--otlp-grpc-endpoint",
            &format!("127.0.0.1:{port}"),
        ])
        .args([
            "--otlp-http-endpoint",
            &format!("127.0.0.1:{}", pipetrace_e2e::receiver::free_port()),
        ])
        .args(["--exporter", "blackhole"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start rotel");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "rotel never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut cfg = pipetrace_config::Config::default();
    cfg.export.otlp.endpoint = Some(format!("http://127.0.0.1:{port}"));
    cfg.export.queue_spans = n as usize + 1;
    cfg.export.queue_bytes = bytesize::ByteSize::gib(4);
    let host = pipetrace_host::host_info().expect("host");
    let trace = TraceId::from(0x5eed_u128);
    let spans: Vec<ReadySpan> = (0..n)
        .map(|i| ReadySpan {
            kind: Kind::Tool,
            span: span(i, trace),
        })
        .collect();
    let exporter = Sink::start(&cfg, &host, "/dev/null".into()).expect("sink");
    let stats = exporter.stats();
    let (cpu0, t0) = (cpu_now(), Instant::now());
    for s in spans {
        exporter.send(s);
    }
    let flushed = exporter.shutdown(Duration::from_secs(300)).await;
    let (cpu, wall) = (cpu_now() - cpu0, t0.elapsed());
    let _ = rotel.kill();
    let _ = rotel.wait();
    let sent = stats
        .spans
        .otlp
        .sent
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(flushed && sent == n, "sent {sent} of {n}");
    (n as f64 / cpu.as_secs_f64(), sent, wall)
}
