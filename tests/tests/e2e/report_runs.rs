//! `pipetrace report` on an agent's file: one section per run, each with its own tasks,
//! in the table and in the HTML page.
use pipetrace_e2e::{own_agent, pipetrace, stderr};

#[test]
fn a_report_of_an_agents_file_has_one_section_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, out) = own_agent(
        dir.path(),
        "agent",
        // No engine: the agent watches the whole host, where other tests run Snakemake.
        "attribution:\n  engines: []\n  run_rules:\n\
         \x20   - match: { argv: 'pipetrace-report-first' }\n      name: first\n\
         \x20   - match: { argv: 'pipetrace-report-second' }\n      name: second\n",
    );
    for (marker, tool) in [
        ("first", "gzip -c /etc/services"),
        ("second", "sort /etc/services"),
    ] {
        let script = format!("{tool} > /dev/null; : pipetrace-report-{marker}");
        let st = std::process::Command::new("bash")
            .args(["-c", &script, &format!("pipetrace-report-{marker}")])
            .status()
            .unwrap();
        assert!(st.success());
    }
    pipetrace_e2e::wait_for_runs(&out, &["first", "second"]);
    agent.stop();
    let html = dir.path().join("r.html");
    let o = pipetrace()
        .arg("report")
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    let (first, second) = (table.find("run first"), table.find("run second"));
    let (first, second) = (first.expect(&table), second.expect(&table));
    assert!(first < second, "in the order they ran: {table}");
    let (gzip, sort) = (
        table.find("gzip").expect(&table),
        table.find("sort").expect(&table),
    );
    assert!(first < gzip && gzip < second && second < sort, "{table}");
    // One section per run: the agent watches the whole host, where other tests' Slurm jobs
    // (runs of their own) may come and go meanwhile; these two runs are judged.
    let page = std::fs::read_to_string(&html).unwrap();
    let sections: Vec<&str> = page.split("<section id=\"run-").skip(1).collect();
    let of = |run: &str| {
        let mine: Vec<&&str> = (sections.iter())
            .filter(|s| s.contains(&format!("\"><h1>run {run}</h1>")))
            .collect();
        assert_eq!(mine.len(), 1, "one section of run {run}: {page}");
        *mine[0]
    };
    // Each listed in the page's index, linked to its own section.
    for run in ["first", "second"] {
        assert!(
            page.contains(&format!("\">run {run}</a> ")),
            "no index entry of {run}"
        );
    }
    assert!(
        of("first").contains(">gzip<") && !of("first").contains(">sort<"),
        "{page}"
    );
    assert!(
        of("second").contains(">sort<") && !of("second").contains(">gzip<"),
        "{page}"
    );
}
