//! `run started` and `task started`: zero-length spans exported as a run or task is found
//! running, so a backend shows what runs before it ends. Each hangs under the run's or
//! task's own span (its id is known from the start), which follows when that ends.
use opentelemetry::{
    KeyValue,
    trace::{SpanId, Status},
};
use pipetrace_semconv::attr;

use super::{Ids, Kind, ReadySpan, SpanBuilder, ids};
use pipetrace_core::attribution::EntityRef;
use pipetrace_core::tree::Proc;

impl SpanBuilder {
    /// The span saying that `entity` (a run or a task of run `run`, whose root is `p`),
    /// known as `name`, runs; with what it usually takes, where its history says.
    pub fn started(
        &self,
        run: pipetrace_core::event::ProcKey,
        entity: EntityRef,
        p: &Proc,
        name: &str,
        usual_s: Option<f64>,
    ) -> ReadySpan {
        let what = match entity {
            EntityRef::Run(_) => "run started",
            _ => "task started",
        };
        let mut a = vec![
            KeyValue::new(attr::STARTED_NAME, name.to_string()),
            KeyValue::new(attr::CICD_PIPELINE_RUN_ID, self.run_id(run)),
        ];
        // As the root's own span will say (it runs: no exit yet).
        self.process_attrs(p, matches!(entity, EntityRef::Task(_)), &mut a);
        // Its expected end, for a backend that shows what runs.
        if let Some(u) = usual_s {
            a.push(KeyValue::new(attr::HISTORY_USUAL_DURATION, u));
        }
        let ids = Ids {
            trace: self.trace_id(run),
            span: SpanId::from_bytes(ids::span_id(&self.host.boot_id, what, p.key)),
            parent: self.span_id(entity),
            remote: false,
        };
        let times = (p.start_ns, p.start_ns);
        let span = self.span_at(ids, what.into(), times, Vec::new(), a, Status::Unset);
        ReadySpan {
            kind: Kind::Started,
            span,
        }
    }
}
