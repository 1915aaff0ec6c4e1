//! Every process, however short: a shell loop of 5,000 `/bin/true` yields exactly 5,000 tools
//! when the trace has no byte budget (`export.max_trace_bytes: 0`; with one, such repeats
//! fold: tests/tests/e2e/trace_budget.rs).
use pipetrace_e2e::{run_shell, stderr};

#[test]
fn five_thousand_short_processes_five_thousand_tool_spans() {
    let dir = tempfile::tempdir().unwrap();
    let script = "i=0; while [ $i -lt 5000 ]; do /bin/true; i=$((i+1)); done";
    let exact = [("PIPETRACE_EXPORT__MAX_TRACE_BYTES", "0")];
    let (spans, run) = run_shell(dir.path(), "bash", script, &exact);
    assert!(run.status.success(), "{}", stderr(&run));
    let text = stderr(&run);
    assert!(!text.contains("WARNING"), "no loss may be reported: {text}");
    let tools: Vec<_> = spans.iter().filter(|s| s.is_tool()).collect();
    assert_eq!(tools.len(), 5000, "tool spans");
    for t in &tools {
        assert_eq!(t.str("pipetrace.tool.name"), "true");
        // The command line was copied in the kernel at exec: even a 1 ms process has it.
        assert_eq!(t.str("process.command_line"), "/bin/true");
        assert_eq!(t.int("process.exit.code"), Some(0));
    }
    let pids: std::collections::BTreeSet<_> = tools.iter().map(|t| t.span_id.clone()).collect();
    assert_eq!(pids.len(), 5000, "5,000 distinct processes");
    assert_eq!(
        spans.iter().filter(|s| s.is_task()).count(),
        5000,
        "each a task of the script"
    );
    assert_eq!(spans.iter().filter(|s| s.is_run()).count(), 1);
}
