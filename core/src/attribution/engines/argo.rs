//! Argo workflows: each step runs as a pod, on whichever node Kubernetes chose. The
//! workflow is the run, named alike on every node (`argo/<namespace>/<workflow>`); each step
//! pod's main container is a task of it, from the node that ran it. No pod is the workflow
//! (its root node is Argo's, not a pod's), so no node exports the run's own span: every
//! step's span points at the one the workflow's identity names, and the trace is one. Only
//! a workflow of a single pod (the pod runs the root node) exports the run span itself.
//!
//! Argo's own containers (`init`, `wait`: `argoexec init|wait`) are no step: they start no
//! run. In the main container Argo's `argoexec emissary -- <command>` starts the step's
//! command; `argoexec` elsewhere in a step is Argo's work, a helper.
use super::{Class, Engine, EngineKind, EngineRun, MultiNode, Place, Shared};
use crate::attribution::TaskInfo;
use crate::{
    attribution::naming,
    containers::Container,
    tree::{Image, Proc},
};

/// An Argo workflow: always on, not in `attribution.engines`.
pub const KIND: EngineKind = EngineKind::scheduler("argo");

/// An Argo workflow's run starts with the main container of one of its pods.
pub const ENGINE: Engine = Engine::scheduler(KIND, |placed, image, _| {
    let step = ArgoStep::start(placed.argo?, image)?;
    Some(Box::new(step))
});

pub struct ArgoStep {
    namespace: String,
    workflow: String,
    /// The step's name; `None` for the workflow's root node (the run itself).
    step: Option<String>,
}

/// Argo's reserved container names, for its executor.
const HELPER_CONTAINERS: &[&str] = &["init", "wait"];
const EXECUTOR: &str = "argoexec";

fn program(image: &Image) -> String {
    naming::tool_name_of(naming::program_name(&image.path, &image.argv), &image.argv)
}

/// Whether `image` runs Argo's executor for something else than starting a step's command.
fn executor_helper(image: &Image) -> bool {
    program(image) == EXECUTOR && !image.argv.iter().any(|a| a == "emissary")
}

impl ArgoStep {
    /// The first process of an Argo pod's container (`c`, which it runs `image` in): the
    /// step of the pod's main container, or the workflow itself for a pod running its root
    /// node. None for Argo's own containers, the pod's sandbox (`pause`), or a pod whose
    /// namespace the node does not show (the run's identity would not be every node's).
    pub(crate) fn start(c: &Container, image: &Image) -> Option<Self> {
        let argo = c.details.argo.as_ref()?;
        let k8s = c.details.k8s.as_ref()?;
        // Only the step's own container: not Argo's, nor a sidecar (a service mesh's proxy,
        // a template's `sidecars:`). Where the node does not name the container yet, only
        // Argo's starter of the step's command is believed.
        let main = match (k8s.container.as_deref(), argo.main_container.as_deref()) {
            (Some(name), Some(main)) => name == main,
            (Some(name), None) => !HELPER_CONTAINERS.contains(&name),
            (None, _) => program(image) == EXECUTOR && !executor_helper(image),
        };
        if !main || executor_helper(image) || program(image) == "pause" {
            return None;
        }
        Some(Self {
            namespace: k8s.namespace.clone(),
            workflow: argo.workflow.clone(),
            step: argo.display(),
        })
    }
}

impl MultiNode for ArgoStep {
    fn shared(&self) -> Option<Shared> {
        Some(Shared {
            identity: format!("argo/{}/{}", self.namespace, self.workflow),
            part: self.step.clone().map(TaskInfo::named),
        })
    }

    fn awaits_identity(&self) -> bool {
        false
    }
}

impl EngineRun for ArgoStep {
    fn multi_node(&self) -> Option<&dyn MultiNode> {
        Some(self)
    }

    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        self.workflow.clone()
    }

    /// A workflow's name is mostly generated (`<prefix>-<random>`): no key to compare runs.
    fn pipeline_key(&self) -> String {
        String::new()
    }

    /// In a step, what runs is the step's own work (tools of its task).
    fn folds_helpers(&self) -> bool {
        self.step.is_none()
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        if program(image) == EXECUTOR {
            return Class::Helper;
        }
        match (self.step.is_some(), place.under_run) {
            (false, true) => Class::Task,
            _ => Class::Undecided,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::{ArgoPod, Details, K8s};

    fn image(argv: &[&str]) -> Image {
        Image {
            path: format!("/usr/bin/{}", argv[0]),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    fn container(name: &str, node: &str) -> Container {
        Container {
            id: "a".repeat(64),
            slurm: None,
            runtime: Some("containerd"),
            pod_uid: Some("0c7a3f5e-8b1d-4c2e-9f00-1234567890ab".into()),
            details: Details {
                k8s: Some(K8s {
                    namespace: "argo".into(),
                    pod: "wf-x-align-1".into(),
                    container: Some(name.into()),
                }),
                argo: Some(ArgoPod {
                    workflow: "wf-x".into(),
                    node: node.into(),
                    template: None,
                    main_container: Some("main".into()),
                }),
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_step_pods_main_container_is_a_task_of_the_workflow_on_every_node() {
        let main = container("main", "wf-x.align(0)");
        let emissary = image(&["argoexec", "emissary", "--", "bwa", "mem"]);
        let step = ArgoStep::start(&main, &emissary).unwrap();
        let other = ArgoStep::start(&container("main", "wf-x.sort"), &image(&["sh"])).unwrap();
        let (a, b) = (step.shared().unwrap(), other.shared().unwrap());
        assert_eq!(a.identity, "argo/argo/wf-x");
        assert_eq!(a.identity, b.identity, "one run, whichever node");
        assert_eq!(
            (a.part.map(|p| p.name), b.part.map(|p| p.name)),
            (Some("align(0)".into()), Some("sort".into()))
        );
        assert_eq!(step.pipeline_name(), "wf-x");
        let root = ArgoStep::start(&container("main", "wf-x"), &image(&["sh"])).unwrap();
        assert_eq!(
            root.shared().unwrap().part,
            None,
            "a one-pod workflow's pod"
        );
    }

    #[test]
    fn argos_own_containers_and_the_sandbox_are_no_step() {
        let sh = image(&["sh"]);
        for name in ["init", "wait"] {
            assert!(ArgoStep::start(&container(name, "wf-x.a"), &sh).is_none());
        }
        let unnamed = |c: Container| {
            let mut c = c;
            c.details.k8s.as_mut().unwrap().container = None;
            c
        };
        let c = unnamed(container("main", "wf-x.a"));
        assert!(ArgoStep::start(&c, &image(&["argoexec", "wait"])).is_none());
        assert!(ArgoStep::start(&c, &image(&["pause"])).is_none());
        // Unnamed, only Argo's starter of the step's command is believed.
        assert!(ArgoStep::start(&c, &sh).is_none());
        let emissary = image(&["argoexec", "emissary", "--", "sh"]);
        assert!(ArgoStep::start(&c, &emissary).is_some());
        // A sidecar (a service mesh's proxy) is no step.
        assert!(ArgoStep::start(&container("istio-proxy", "wf-x.a"), &sh).is_none());
        let mut no_ns = container("main", "wf-x.a");
        no_ns.details.k8s = None;
        assert!(ArgoStep::start(&no_ns, &sh).is_none());
    }

    #[test]
    fn argoexec_in_a_step_is_a_helper_and_the_rest_its_tools() {
        let mut step = ArgoStep::start(&container("main", "wf-x.a"), &image(&["sh"])).unwrap();
        let p = Proc::new(
            crate::event::ProcKey {
                pid: 2,
                start_ticks: 1,
            },
            None,
            1,
            0,
            "x".into(),
        );
        let place = Place {
            parent_is_root: true,
            under_run: true,
        };
        let helper = step.classify(&p, &image(&["argoexec", "artifact"]), place);
        assert_eq!(helper, Class::Helper);
        let tool = step.classify(&p, &image(&["gzip"]), place);
        assert_eq!(tool, Class::Undecided);
        assert!(!step.folds_helpers(), "a step's processes are its tools");
    }
}
