//! The crate's JSON-LD (`ro-crate-metadata.json`) as the Provenance Run Crate profile 0.5
//! shapes it: the workflow and its steps, the engine's OrganizeAction over one ControlAction
//! and CreateAction per task, the programs as SoftwareApplications, the files by path.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::{
    facts::{FileFacts, Software},
    model::{Run, Task},
    records::Job,
    vocab::{
        Language, PROFILES, TERMS, UNDECLARED_INPUT, UNDECLARED_OUTPUT, engine_home, file_id,
        gone_id, iso, license_id, media_type, program_id, refs, set, slug, software_entity, status,
    },
};

/// Everything the crate is made of: the run, the engine's records and the facts found at
/// the end.
pub struct Crate<'a> {
    pub run: &'a Run,
    /// The workflow file, relative to the crate's root.
    pub workflow: &'a str,
    /// The workflow file as run (its modification time): the steps' version too.
    pub workflow_version: String,
    pub language: Language,
    pub engine: Software,
    /// Each task's job as the engine declared it, by task id.
    pub jobs: BTreeMap<String, &'a Job>,
    /// The workflow's inputs that are values, as the engine was given them.
    pub parameters: Vec<Parameter>,
    /// Every file named that exists at the end, by id.
    pub files: BTreeMap<String, FileFacts>,
    pub programs: BTreeMap<String, Software>,
    pub license: &'a str,
    pub publisher: Option<&'a str>,
    pub publisher_url: Option<&'a str>,
    /// Today, for datePublished (ISO 8601).
    pub published: String,
}

/// A workflow input that is a value: its name, the value as text, and its schema.org
/// DataType (Text, Integer, Float, Boolean).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub value: String,
    pub kind: &'static str,
}

/// What a task read and wrote by the crate's ids: the declared ones first (they appear
/// whatever the kernel saw), then what its tools opened; those the engine did not declare
/// are listed apart too (none when it declared nothing of the task).
pub struct TaskFiles {
    pub inputs: BTreeSet<String>,
    pub outputs: BTreeSet<String>,
    pub undeclared_inputs: BTreeSet<String>,
    pub undeclared_outputs: BTreeSet<String>,
}

pub(crate) fn task_files(task: &Task, job: Option<&Job>) -> TaskFiles {
    let declared = |f: fn(&Job) -> &BTreeSet<String>| job.map(f).cloned().unwrap_or_default();
    let (din, dout) = (declared(|j| &j.inputs), declared(|j| &j.outputs));
    let apart = |seen: &BTreeSet<String>, declared: &BTreeSet<String>| match job {
        Some(_) => seen.difference(declared).cloned().collect(),
        None => BTreeSet::new(),
    };
    TaskFiles {
        undeclared_inputs: apart(&task.reads, &din),
        undeclared_outputs: apart(&task.writes, &dout),
        inputs: din.union(&task.reads).cloned().collect(),
        outputs: dout.union(&task.writes).cloned().collect(),
    }
}

impl Crate<'_> {
    /// The crate's `ro-crate-metadata.json`.
    pub(crate) fn json(&self) -> Value {
        let mut graph: Vec<Value> = Vec::new();
        let run = self.run;
        let steps = self.steps();
        let files: Vec<(&Task, TaskFiles)> = (run.tasks.iter())
            .map(|t| (t, task_files(t, self.jobs.get(&t.id).copied())))
            .collect();
        // Files that exist at the end are data entities; the run's own (its outputs) only
        // those.
        let known = |ids: &BTreeSet<String>| -> Vec<String> {
            (ids.iter().map(|p| file_id(p)))
                .filter(|id| self.files.contains_key(id))
                .collect()
        };
        // A task's: gone ones too (the engine's temporaries), as a CreativeWork named by
        // the path, since no file is there to be a data entity.
        let mut gone: BTreeSet<String> = BTreeSet::new();
        let mut any = |ids: &BTreeSet<String>| -> Vec<String> {
            (ids.iter())
                .map(|p| match self.files.contains_key(&file_id(p)) {
                    true => file_id(p),
                    false => {
                        gone.insert(p.clone());
                        gone_id(p)
                    }
                })
                .collect()
        };
        let (wf_inputs, wf_outputs) = self.workflow_files(&files);
        let person = run.user.as_ref().map(|u| format!("#person-{}", slug(u)));

        graph.push(json!({
            "@id": "ro-crate-metadata.json",
            "@type": "CreativeWork",
            "about": {"@id": "./"},
            "conformsTo": [
                {"@id": "https://w3id.org/ro/crate/1.1"},
                {"@id": "https://w3id.org/workflowhub/workflow-ro-crate/1.0"}
            ]
        }));
        let mut root = json!({
            "@id": "./",
            "@type": "Dataset",
            "name": format!("Run of {} ({})", self.workflow, run.name),
            "description": format!(
                "Provenance of one run of {} by {}, as pipetrace traced it: the engine's \
                 records and the files each tool opened (paths and sizes, never contents).",
                self.workflow, run.engine
            ),
            "datePublished": self.published,
            "license": {"@id": license_id(self.license)},
            "conformsTo": PROFILES.iter().map(|(id, ..)| json!({"@id": id})).collect::<Vec<_>>(),
            "mainEntity": {"@id": file_id(self.workflow)},
        });
        let mut parts = vec![file_id(self.workflow), "README.md".to_string()];
        parts.extend(
            self.files
                .keys()
                .filter(|id| **id != file_id(self.workflow))
                .cloned(),
        );
        set(&mut root, "hasPart", refs(parts));
        set(&mut root, "author", person.clone().and_then(|p| refs([p])));
        set(
            &mut root,
            "publisher",
            self.publisher.and_then(|_| refs(["#publisher".into()])),
        );
        let mut mentions = vec!["#run".to_string()];
        mentions.extend(run.tasks.iter().map(|t| format!("#task-{}", t.id)));
        set(&mut root, "mentions", refs(mentions));
        graph.push(root);
        graph.push(json!({
            "@id": "README.md",
            "@type": "File",
            "about": {"@id": "./"},
            "encodingFormat": "text/markdown"
        }));
        for (id, name, version) in PROFILES {
            graph.push(
                json!({"@id": id, "@type": "CreativeWork", "name": name, "version": version}),
            );
        }
        graph.push(json!({
            "@id": license_id(self.license),
            "@type": "CreativeWork",
            "name": self.license,
        }));
        if let (Some(p), Some(name)) = (&person, &run.user) {
            let mut node = json!({"@id": p, "@type": "Person", "name": name});
            // The publishing organization is taken as the user's own.
            set(
                &mut node,
                "affiliation",
                self.publisher.and_then(|_| refs(["#publisher".into()])),
            );
            graph.push(node);
        }
        if let Some(name) = self.publisher {
            let mut node = json!({"@id": "#publisher", "@type": "Organization", "name": name});
            set(&mut node, "url", self.publisher_url.map(Value::from));
            graph.push(node);
        }
        for (term, what) in [
            (
                UNDECLARED_INPUT,
                "a file a task's tools read that its engine did not declare as an input of the task",
            ),
            (
                UNDECLARED_OUTPUT,
                "a file a task's tools wrote that its engine did not declare as an output of the task",
            ),
        ] {
            graph.push(json!({
                "@id": format!("{TERMS}{term}"),
                "@type": "rdf:Property",
                "rdfs:label": term,
                "rdfs:comment": what,
            }));
        }

        // The workflow, its steps and their tools.
        let mut workflow = json!({
            "@id": file_id(self.workflow),
            "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
            "name": self.workflow,
            "url": file_id(self.workflow),
            "version": self.workflow_version,
            "encodingFormat": media_type(self.workflow),
            "conformsTo": {"@id": "https://bioschemas.org/profiles/ComputationalWorkflow/1.0-RELEASE"},
            "programmingLanguage": {"@id": self.language.entity()["@id"].clone()},
        });
        if let Some(f) = self.files.get(&file_id(self.workflow)) {
            set(
                &mut workflow,
                "contentSize",
                Some(json!(f.size.to_string())),
            );
            set(&mut workflow, "sha256", f.sha256.clone().map(Value::from));
        }
        set(
            &mut workflow,
            "hasPart",
            refs(steps.iter().map(|s| format!("#tool-{}", slug(s)))),
        );
        set(
            &mut workflow,
            "step",
            refs(steps.iter().map(|s| format!("#step-{}", slug(s)))),
        );
        let params = |dir: &str, ids: &[String]| {
            ids.iter()
                .map(|id| format!("#param-{dir}-{}", slug(id)))
                .collect::<Vec<_>>()
        };
        let value_params: Vec<String> = (self.parameters.iter())
            .map(|p| format!("#param-value-{}", slug(&p.name)))
            .collect();
        let mut inputs = params("in", &wf_inputs);
        inputs.extend(value_params.iter().cloned());
        set(&mut workflow, "input", refs(inputs));
        set(&mut workflow, "output", refs(params("out", &wf_outputs)));
        graph.push(workflow);
        graph.push(self.language.entity());
        let mut example_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (dir, ids) in [("in", &wf_inputs), ("out", &wf_outputs)] {
            for (param, id) in params(dir, ids).into_iter().zip(ids.iter()) {
                graph.push(json!({
                    "@id": param,
                    "@type": "FormalParameter",
                    "additionalType": "File",
                    "name": id,
                    "workExample": {"@id": id},
                }));
                example_of.entry(id.clone()).or_default().push(param);
            }
        }
        // The workflow's inputs that are values (CWL's strings, numbers, booleans).
        for (p, param) in self.parameters.iter().zip(&value_params) {
            let value = format!("#value-{}", slug(&p.name));
            graph.push(json!({
                "@id": param,
                "@type": "FormalParameter",
                "additionalType": p.kind,
                "name": p.name,
                "workExample": {"@id": value},
            }));
            graph.push(json!({
                "@id": value,
                "@type": "PropertyValue",
                "name": p.name,
                "value": p.value,
                "exampleOfWork": {"@id": param},
            }));
        }
        for (i, s) in steps.iter().enumerate() {
            graph.push(json!({
                "@id": format!("#step-{}", slug(s)),
                "@type": "HowToStep",
                "name": s,
                "position": i.to_string(),
                "workExample": {"@id": format!("#tool-{}", slug(s))},
            }));
            graph.push(json!({
                "@id": format!("#tool-{}", slug(s)),
                "@type": "SoftwareApplication",
                "name": s,
                "description": format!("The step {s} of {}", self.workflow),
                "url": file_id(self.workflow),
                "softwareVersion": self.workflow_version,
            }));
        }

        // The engine and the programs.
        let engine_id = program_id(&self.engine);
        graph.push(software_entity(
            &self.engine,
            &run.engine,
            engine_home(&run.engine),
        ));
        for (path, s) in self
            .programs
            .iter()
            .filter(|(p, _)| **p != self.engine.path)
        {
            let name = path.rsplit('/').next().unwrap_or(path);
            graph.push(software_entity(s, name, None));
        }

        // The actions: the engine's, the run's, each task's.
        let mut organize = json!({
            "@id": "#orchestrate",
            "@type": "OrganizeAction",
            "name": format!("{} orchestrating {}", run.engine, self.workflow),
            "instrument": {"@id": engine_id},
            "result": {"@id": "#run"},
            "startTime": iso(run.start),
            "endTime": iso(run.end),
            "actionStatus": status(&run.error),
        });
        set(
            &mut organize,
            "object",
            refs(run.tasks.iter().map(|t| format!("#control-{}", t.id))),
        );
        set(&mut organize, "error", run.error.clone().map(Value::from));
        set(
            &mut organize,
            "agent",
            person.clone().and_then(|p| refs([p])),
        );
        graph.push(organize);
        let mut run_action = json!({
            "@id": "#run",
            "@type": "CreateAction",
            "name": format!("Run of {}", self.workflow),
            "description": run.command_line,
            "instrument": {"@id": file_id(self.workflow)},
            "startTime": iso(run.start),
            "endTime": iso(run.end),
            "actionStatus": status(&run.error),
        });
        let values = (self.parameters.iter()).map(|p| format!("#value-{}", slug(&p.name)));
        set(
            &mut run_action,
            "object",
            refs(wf_inputs.iter().cloned().chain(values)),
        );
        let all_out: BTreeSet<String> = files.iter().flat_map(|(_, f)| known(&f.outputs)).collect();
        set(&mut run_action, "result", refs(all_out));
        set(&mut run_action, "error", run.error.clone().map(Value::from));
        set(
            &mut run_action,
            "agent",
            person.clone().and_then(|p| refs([p])),
        );
        graph.push(run_action);
        for (task, f) in &files {
            let step = format!("#step-{}", slug(&task.step));
            let mut control = json!({
                "@id": format!("#control-{}", task.id),
                "@type": "ControlAction",
                "name": task.label,
                "instrument": {"@id": step},
                "object": {"@id": format!("#task-{}", task.id)},
                "actionStatus": status(&task.error),
            });
            set(&mut control, "error", task.error.clone().map(Value::from));
            graph.push(control);
            let mut instruments = vec![format!("#tool-{}", slug(&task.step))];
            let id = |p: &String| (self.programs.get(p)).map_or_else(|| file_id(p), program_id);
            instruments.extend(task.programs.iter().map(id));
            let mut objects = any(&f.inputs);
            let pv = |(k, _): &(String, String)| format!("#task-{}-{}", task.id, slug(k));
            objects.extend(task.parameters.iter().map(pv));
            let mut action = json!({
                "@id": format!("#task-{}", task.id),
                "@type": "CreateAction",
                "name": task.label,
                "description": self.task_description(task),
                "startTime": iso(task.start),
                "endTime": iso(task.end),
                "actionStatus": status(&task.error),
            });
            set(&mut action, "instrument", refs(instruments));
            set(&mut action, "object", refs(objects));
            set(&mut action, "result", refs(any(&f.outputs)));
            set(
                &mut action,
                UNDECLARED_INPUT,
                refs(any(&f.undeclared_inputs)),
            );
            set(
                &mut action,
                UNDECLARED_OUTPUT,
                refs(any(&f.undeclared_outputs)),
            );
            set(&mut action, "error", task.error.clone().map(Value::from));
            set(&mut action, "agent", person.clone().and_then(|p| refs([p])));
            graph.push(action);
            for p in &task.parameters {
                graph.push(
                    json!({"@id": pv(p), "@type": "PropertyValue", "name": p.0, "value": p.1}),
                );
            }
        }

        for p in &gone {
            graph.push(json!({
                "@id": gone_id(p),
                "@type": "CreativeWork",
                "name": p,
                "description": "A file of a task that was not there at the end of the run \
                                (a temporary of the engine's, or an intermediate output it did \
                                not keep): its name only.",
            }));
        }

        // The files, by path, with what was found of them at the end.
        for (id, facts) in &self.files {
            if *id == file_id(self.workflow) {
                continue;
            }
            let mut node = json!({
                "@id": id,
                "@type": "File",
                "name": id.rsplit('/').next().unwrap_or(id),
                "contentSize": facts.size.to_string(),
                "encodingFormat": media_type(id),
            });
            set(&mut node, "sha256", facts.sha256.clone().map(Value::from));
            set(
                &mut node,
                "exampleOfWork",
                example_of.get(id).and_then(|p| refs(p.clone())),
            );
            graph.push(node);
        }
        let mut context = Map::new();
        context.insert(
            UNDECLARED_INPUT.into(),
            json!({"@id": format!("{TERMS}{UNDECLARED_INPUT}"), "@type": "@id"}),
        );
        context.insert(
            UNDECLARED_OUTPUT.into(),
            json!({"@id": format!("{TERMS}{UNDECLARED_OUTPUT}"), "@type": "@id"}),
        );
        context.insert("sha256".into(), json!("http://schema.org/sha256"));
        json!({
            "@context": ["https://w3id.org/ro/crate/1.1/context", Value::Object(context)],
            "@graph": graph,
        })
    }

    /// The steps in the order their first task started.
    fn steps(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        (self.run.tasks.iter())
            .filter(|t| seen.insert(t.step.clone()))
            .map(|t| t.step.clone())
            .collect()
    }

    /// The workflow's inputs (read, made by no task) and outputs (made, read by no task),
    /// by the engine's declarations where it made them and what was opened besides.
    fn workflow_files(&self, files: &[(&Task, TaskFiles)]) -> (Vec<String>, Vec<String>) {
        let ids = |f: fn(&TaskFiles) -> &BTreeSet<String>| -> BTreeSet<String> {
            (files.iter().flat_map(|(_, t)| f(t).iter()))
                .map(|p| file_id(p))
                .filter(|id| self.files.contains_key(id) && *id != file_id(self.workflow))
                .collect()
        };
        let (read, made) = (ids(|f| &f.inputs), ids(|f| &f.outputs));
        (
            read.difference(&made).cloned().collect(),
            made.difference(&read).cloned().collect(),
        )
    }

    fn task_description(&self, task: &Task) -> String {
        let declared = match self.jobs.get(&task.id) {
            Some(_) => "files as the engine declared them and as its tools opened them",
            None => "files as its tools opened them (the engine recorded no declaration of it)",
        };
        format!("{}: {declared}. Command: {}", task.label, task.command_line)
    }
}
