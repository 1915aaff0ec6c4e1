//! Cost and work by who: totals per user (`user.name`, else `user.id`) and per cost centre
//! (`pipetrace.cost.centre`), over runs (a run span stands for all its tasks and tools; a
//! run without its span in the file counts by its tasks; a part of a run on another node,
//! a Slurm step, adds its own figures as one task).
use std::{collections::BTreeMap, fmt::Write as _};

use pipetrace_semconv::attr;
use serde::{Deserialize, Serialize};

use super::markup::esc;
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    pub runs: u64,
    pub tasks: u64,
    /// CPU seconds.
    pub cpu_s: f64,
    /// At the configured prices; 0 where none were.
    pub cost: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ByWho {
    pub users: BTreeMap<String, Sum>,
    pub centres: BTreeMap<String, Sum>,
    /// The currency of the costs, where any had one.
    pub currency: Option<String>,
}

/// What no span says: no user known, no cost centre set.
const UNKNOWN: &str = "(none)";

fn user_of(s: &ReportSpan) -> Option<&str> {
    s.text(attr::USER_NAME).or_else(|| s.text(attr::USER_ID))
}

impl ByWho {
    /// Totals over every run in `spans`; empty when no span names a user or a cost centre.
    pub(crate) fn of(spans: &[ReportSpan]) -> Self {
        let mut out = Self::default();
        // Grouped by trace without copying the spans (an agent's file may hold millions).
        let mut traces: BTreeMap<&str, Vec<&ReportSpan>> = BTreeMap::new();
        for s in spans {
            traces.entry(s.trace.as_str()).or_default().push(s);
        }
        for run in traces.values() {
            let mut tasks = run.iter().filter(|s| s.kind == Kind::Task).count() as u64;
            // A trace may hold several run spans, each of its own processes: a Slurm job's
            // run and its steps' parts (tasks of it, each on its node).
            let roots: Vec<&ReportSpan> = (run.iter().copied())
                .filter(|s| s.kind == Kind::Run)
                .collect();
            if roots.is_empty() {
                (run.iter().filter(|s| s.kind == Kind::Task)).for_each(|t| out.add(t, 0, 1));
                continue;
            }
            for r in &roots {
                match r.text(attr::CICD_PIPELINE_TASK_NAME) {
                    Some(_) => out.add(r, 0, 1),
                    None => out.add(r, 1, std::mem::take(&mut tasks)),
                }
            }
            if tasks > 0 {
                out.add_tasks(roots[0], tasks);
            }
        }
        let named = |m: &BTreeMap<String, Sum>| m.keys().any(|k| k != UNKNOWN);
        if !named(&out.users) && !named(&out.centres) {
            return Self::default();
        }
        out
    }

    /// The sums of span `s`'s user and of its cost centre.
    fn sums_of(&mut self, s: &ReportSpan) -> [&mut Sum; 2] {
        let user = user_of(s).unwrap_or(UNKNOWN).to_string();
        let centre = s.text(attr::COST_CENTRE).unwrap_or(UNKNOWN).to_string();
        [
            self.users.entry(user).or_default(),
            self.centres.entry(centre).or_default(),
        ]
    }

    fn add(&mut self, s: &ReportSpan, runs: u64, tasks: u64) {
        if self.currency.is_none() {
            self.currency = s.text(attr::COST_CURRENCY).map(str::to_string);
        }
        for sum in self.sums_of(s) {
            sum.runs += runs;
            sum.tasks += tasks;
            sum.cpu_s += s.cpu();
            sum.cost += s.num(attr::COST);
        }
    }

    /// Tasks of a trace whose run span is not in the file, with a part's user.
    fn add_tasks(&mut self, s: &ReportSpan, tasks: u64) {
        for sum in self.sums_of(s) {
            sum.tasks += tasks;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.users.is_empty() && self.centres.is_empty()
    }

    fn rows(&self) -> [(&'static str, &BTreeMap<String, Sum>); 2] {
        [("user", &self.users), ("cost centre", &self.centres)]
    }

    fn cost(&self, s: &Sum) -> String {
        match &self.currency {
            Some(c) => format!("{:.4} {c}", s.cost),
            None => "-".into(),
        }
    }

    /// Whether the terminal tables say anything: more than one user, or more than one cost
    /// centre (one alone is the run's own total again).
    pub(crate) fn tells(&self) -> bool {
        self.rows().iter().any(|(_, rows)| rows.len() > 1)
    }

    /// Small tables under the per-task one: by user where more than one ran, by cost centre
    /// where more than one was charged. (The HTML page shows both always.)
    pub(crate) fn render(&self, out: &mut String) {
        for (what, rows) in self.rows() {
            if rows.len() < 2 {
                continue;
            }
            let _ = writeln!(
                out,
                "\n{:<24} {:>5} {:>6} {:>10} {:>14}",
                format!("by {what}"),
                "runs",
                "tasks",
                "cpu (s)",
                "cost"
            );
            for (who, s) in rows {
                let cost = self.cost(s);
                let _ = writeln!(
                    out,
                    "{who:<24} {:>5} {:>6} {:>10.2} {cost:>14}",
                    s.runs, s.tasks, s.cpu_s
                );
            }
        }
    }

    /// The same as an HTML section.
    pub(crate) fn html(&self) -> String {
        let mut out = String::new();
        // One user, one centre and no cost would only say the run's own CPU again.
        if self.is_empty() || (self.currency.is_none() && !self.tells()) {
            return out;
        }
        out.push_str("<section class=\"who\"><h2>Cost by user and cost centre</h2>");
        for (what, rows) in self.rows() {
            let _ = write!(
                out,
                "<table><tr><th>{what}</th><th>runs</th><th>tasks</th><th>CPU (s)</th>\
                 <th>cost</th></tr>"
            );
            for (who, s) in rows {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td></tr>",
                    esc(who),
                    s.runs,
                    s.tasks,
                    s.cpu_s,
                    esc(&self.cost(s))
                );
            }
            out.push_str("</table>");
        }
        out.push_str("</section>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, kind: Kind, texts: &[(&str, &str)], cpu: f64, cost: f64) -> ReportSpan {
        let texts: BTreeMap<String, String> = (texts.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut numbers = BTreeMap::new();
        numbers.insert(attr::CPU_USER_TIME.to_string(), cpu);
        numbers.insert(attr::COST.to_string(), cost);
        ReportSpan {
            trace: trace.into(),
            id: format!("{trace}{cpu}"),
            parent: None,
            kind,
            name: "x".into(),
            start: 1,
            end: 2,
            error: None,
            numbers,
            texts,
            lists: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    #[test]
    fn runs_total_by_their_user_and_cost_centre() {
        let run = |trace, user, centre, cpu, cost| {
            let mut t = vec![
                (attr::RUN_ENGINE, "snakemake"),
                (attr::USER_NAME, user),
                (attr::COST_CURRENCY, "USD"),
            ];
            if let Some(c) = centre {
                t.push((attr::COST_CENTRE, c));
            }
            span(trace, Kind::Run, &t, cpu, cost)
        };
        let task = |trace| span(trace, Kind::Task, &[], 1.0, 0.5);
        let spans = [
            run("a", "alice", Some("lab"), 10.0, 1.0),
            task("a"),
            task("a"),
            run("b", "bob", Some("lab"), 4.0, 0.25),
            task("b"),
            run("c", "alice", None, 2.0, 0.125),
        ];
        let w = ByWho::of(&spans);
        let alice = &w.users["alice"];
        assert_eq!(
            (alice.runs, alice.tasks, alice.cpu_s, alice.cost),
            (2, 2, 12.0, 1.125)
        );
        assert_eq!(w.users["bob"].cost, 0.25);
        assert_eq!(
            w.centres["lab"].cost, 1.25,
            "tasks are in their run's total"
        );
        assert_eq!(w.centres[UNKNOWN].runs, 1);
        let mut text = String::new();
        w.render(&mut text);
        assert!(
            text.contains("alice") && text.contains("1.1250 USD"),
            "{text}"
        );
        assert!(w.html().contains("<td>lab</td>"));
        let alone = [span(
            "a",
            Kind::Run,
            &[(attr::USER_NAME, "alice")],
            1.0,
            0.0,
        )];
        assert_eq!(
            ByWho::of(&alone).html(),
            "",
            "one user, no cost: nothing to add"
        );
        let anonymous = [span("a", Kind::Task, &[], 1.0, 0.0)];
        assert!(ByWho::of(&anonymous).is_empty(), "nothing to group by");
    }
}
