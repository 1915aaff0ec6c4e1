//! Nextflow: the run is `nextflow run PIPELINE` (the launcher goes on to exec java; the
//! engine found at its first exec stays). Every task runs as `bash -ue .command.run` (or
//! `bash .command.run nxf_trace`) in its work directory `<workdir>/<2 hex>/<30 hex>`, and
//! `.command.run` names the task in its header: `### name: 'PROC (tag)'` in a block opened by
//! `### ---` (Nextflow 24.04 and later) or `# NEXTFLOW TASK: PROC (tag)` (earlier). Whatever
//! else the engine starts is a helper. On a node where a batch scheduler runs the task, the
//! `.command.run` process itself is recognised (agent mode) and named the same way.
use std::{collections::HashMap, path::Path, time::SystemTime};

use super::{Class, Ended, Engine, EngineRun, Place, digest};
use crate::{
    attribution::{TaskInfo, naming},
    event::ProcKey,
    tree::{Image, Proc},
};

pub const ENGINE: Engine = Engine {
    name: "nextflow",
    recognises: |tool, _| tool == "nextflow" || tool == ".command.run",
    start,
};

struct Nextflow {
    pipeline: String,
    key: String,
    /// The run is one task's `.command.run`, started by a batch scheduler on this node.
    task_root: Option<TaskInfo>,
    /// Tasks named when they started, from their `.command.run`.
    named: HashMap<ProcKey, TaskInfo>,
}

fn start(image: &Image, _started: SystemTime) -> Box<dyn EngineRun> {
    let args = image.argv.get(1..).unwrap_or(&[]);
    let task_root = command_run(image).and_then(|p| read_task(&p));
    let pipeline = match &task_root {
        Some(t) => format!("nextflow task {}", t.name),
        None => args
            .iter()
            .position(|a| a == "run")
            .and_then(|i| args.get(i + 1))
            .map(|s| naming::clean_name(s))
            .unwrap_or_else(|| "nextflow".into()),
    };
    let cwd = image.cwd.as_ref().map(|c| c.display().to_string());
    let key = digest(&["nextflow", &pipeline, cwd.as_deref().unwrap_or("")]);
    Box::new(Nextflow {
        key: format!("{}-{key}", pipeline.replace('/', "_")),
        pipeline,
        task_root,
        named: HashMap::new(),
    })
}

/// Whether a shell runs a task's `.command.run`.
fn runs_command_run(image: &Image) -> bool {
    let script = || image.argv.iter().skip(1).find(|a| !a.starts_with('-'));
    naming::shell_command(&image.argv).is_none()
        && naming::is_shell(&image.path)
        && script().is_some_and(|s| naming::executable_name(s) == ".command.run")
}

/// The `.command.run` a task's shell runs, made absolute with its working directory (None
/// when that is not known: a process gone before its directory could be read).
fn command_run(image: &Image) -> Option<std::path::PathBuf> {
    if !runs_command_run(image) {
        return None;
    }
    let script = image.argv.iter().skip(1).find(|a| !a.starts_with('-'))?;
    let path = Path::new(script);
    match (path.is_absolute(), &image.cwd) {
        (true, _) => Some(path.to_path_buf()),
        (false, Some(cwd)) => Some(cwd.join(path)),
        (false, None) => None,
    }
}

/// A task as its `.command.run` names it.
fn read_task(path: &Path) -> Option<TaskInfo> {
    // The header is at the top; the rest of the file is the engine's wrapper script.
    let text = std::fs::read_to_string(path).ok()?;
    let mut info = parse_header(text.lines().take(40))?;
    let dir = path.parent()?;
    let hash = dir.file_name()?.to_str()?;
    let prefix = dir.parent()?.file_name()?.to_str()?;
    if prefix.len() == 2 && hash.len() >= 6 {
        info.run_id = format!("{prefix}/{hash}");
    }
    Some(info)
}

/// `### name: 'PROC (tag)'` after `### ---` (24.04+), or `# NEXTFLOW TASK: PROC (tag)`.
fn parse_header<'a>(lines: impl Iterator<Item = &'a str>) -> Option<TaskInfo> {
    let mut in_block = false;
    let mut full = None;
    for l in lines {
        if l.trim() == "### ---" {
            in_block = true;
        } else if let Some(n) = l.strip_prefix("# NEXTFLOW TASK: ") {
            full = Some(n.trim().to_string());
        } else if in_block && let Some(n) = l.strip_prefix("### name: ") {
            full = Some(n.trim().trim_matches(['\'', '"']).to_string());
        }
        if full.is_some() {
            break;
        }
    }
    let full = full?;
    let (process, tag) = match full.strip_suffix(')').and_then(|f| f.split_once(" (")) {
        Some((p, t)) => (p.to_string(), Some(t.to_string())),
        None => (full, None),
    };
    Some(TaskInfo {
        name: process,
        tag,
        ..Default::default()
    })
}

impl EngineRun for Nextflow {
    fn engine(&self) -> &str {
        "nextflow"
    }

    fn pipeline_name(&self) -> String {
        self.pipeline.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn needs_cwd(&self, argv: &[String]) -> bool {
        argv.iter().any(|a| a == ".command.run")
    }

    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class {
        if let Some(t) = &self.task_root {
            // The task's own `.command.run` is the run: what it starts is the task.
            return match place.parent_is_root {
                true => {
                    self.named.insert(p.key, t.clone());
                    Class::Task
                }
                false => Class::Undecided,
            };
        }
        // A task whose header cannot be read (it ended before its directory was) is still a
        // task, named by its tool.
        match command_run(image).and_then(|path| read_task(&path)) {
            Some(info) => {
                self.named.insert(p.key, info);
                Class::Task
            }
            None if runs_command_run(image) => Class::Task,
            None => Class::Helper,
        }
    }

    fn provisional(&mut self, task: &Proc) -> Option<String> {
        self.named.get(&task.key).map(|t| t.name.clone())
    }

    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        ended
            .iter()
            .map(|e| {
                let info = self.named.remove(&e.proc.key);
                Some(
                    info.unwrap_or_else(|| {
                        TaskInfo::fallback(e.proc, naming::proc_tool_name(e.proc))
                    }),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_header_formats_name_the_task() {
        let new = "#!/bin/bash\n### ---\n### name: 'NFCORE:RNASEQ:FASTQC (sample1)'\n### container: 'quay.io/x'\n### outputs:\n### - 'a'\n### ...\nset -e\n";
        let t = parse_header(new.lines()).unwrap();
        assert_eq!(
            (t.name.as_str(), t.tag.as_deref()),
            ("NFCORE:RNASEQ:FASTQC", Some("sample1"))
        );
        let old = "#!/bin/bash\n# NEXTFLOW TASK: ALIGN (chr1 (part 2))\nset -e\n";
        let t = parse_header(old.lines()).unwrap();
        assert_eq!(
            (t.name.as_str(), t.tag.as_deref()),
            ("ALIGN", Some("chr1 (part 2)"))
        );
        let untagged = "#!/bin/bash\n### ---\n### name: 'MULTIQC'\n";
        assert_eq!(parse_header(untagged.lines()).unwrap().tag, None);
        assert!(parse_header("#!/bin/bash\necho x\n".lines()).is_none());
        assert!(
            parse_header("#!/bin/bash\n### name: 'X'\n".lines()).is_none(),
            "a name outside the header block is not the header"
        );
    }

    #[test]
    fn a_task_is_read_from_its_work_directory() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work/3f/9a1c0e5d2b7f84c6a0e1d9b2c4f6a8e0");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join(".command.run"),
            "#!/bin/bash\n# NEXTFLOW TASK: SORT (b)\n",
        )
        .unwrap();
        let image = Image {
            path: "/bin/bash".into(),
            argv: ["/bin/bash", "-ue", ".command.run"]
                .map(String::from)
                .to_vec(),
            cwd: Some(work.clone()),
            ..Default::default()
        };
        let t = read_task(&command_run(&image).unwrap()).unwrap();
        assert_eq!(
            (t.name.as_str(), t.tag.as_deref(), t.run_id.as_str()),
            ("SORT", Some("b"), "3f/9a1c0e5d2b7f84c6a0e1d9b2c4f6a8e0")
        );
        let traced = Image {
            argv: ["bash", ".command.run", "nxf_trace"]
                .map(String::from)
                .to_vec(),
            ..image
        };
        assert!(command_run(&traced).is_some());
    }
}
