//! Nextflow: the run is `nextflow run PIPELINE` (the launcher goes on to exec java; the
//! engine found at its first exec stays). Every task runs as `bash -ue .command.run` (or
//! `bash .command.run nxf_trace`) in its work directory `<workdir>/<2 hex>/<30 hex>`, and
//! `.command.run` names the task in its header: `### name: 'PROC (tag)'` in a block opened by
//! `### ---` (Nextflow 24.04 and later) or `# NEXTFLOW TASK: PROC (tag)` (earlier). Whatever
//! else the engine starts is a helper. On a node where a batch scheduler runs the task, the
//! `.command.run` process itself is recognised (agent mode) and named the same way; under
//! Slurm, which runs a copy of `.command.run` as the job's batch script in the task's work
//! directory, that script is.
//!
//! One run across nodes: the launcher records each run in its launch directory's
//! `.nextflow/history` (a tab-separated line per run: time, duration, run name, status,
//! revision, session id, command; status `-` while it runs) before any task starts. The head
//! reads it in its working directory, a task's node beside the work directory
//! (`<launch>/work/<2 hex>/<30 hex>`): the running run's session id and name name the run
//! alike on both, and the task is a part of the head's run.
//!
//! How far a head's run is comes from its `.nextflow.log` (see `progress`).
mod progress;
mod workdirs;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    time::SystemTime,
};

use super::{Class, Ended, Engine, EngineRun, MultiNode, Place, Shared, Wrapper, digest};
use crate::{
    attribution::{TaskInfo, naming},
    event::ProcKey,
    port::{Host, SharedHost},
    tree::{Image, Proc},
};

/// As `pipetrace.run.engine` and `attribution.engines` name it.
pub const KIND: super::EngineKind = super::EngineKind::engine("nextflow");

pub const ENGINE: Engine = Engine {
    kind: KIND,
    recognises: |tool, _| tool == "nextflow" || tool == ".command.run",
    start,
    // The launch directory's `.nextflow/` and each work directory's wrapper files.
    bookkeeping: crate::files::Bookkeeping {
        parts: &["/.nextflow/"],
        names: &[
            ".command.sh",
            ".command.run",
            ".command.out",
            ".command.err",
            ".command.log",
            ".command.trace",
            ".command.begin",
            ".command.env",
            ".exitcode",
        ],
    },
    started_by_parent: None,
    // A Slurm batch step whose script is a Nextflow task's wrapper is that task.
    starts_in: Some(|placed, image, host| {
        placed.slurm.filter(|s| s.step == "batch")?;
        under_batch(host.clone(), image)
    }),
    watches: None,
    allocates: None,
    python_package: None,
};

struct Nextflow {
    host: SharedHost,
    pipeline: String,
    key: String,
    /// The run is one task's `.command.run`, started by a batch scheduler on this node.
    task_root: Option<TaskInfo>,
    /// Where the run's `.nextflow/history` is: the head's working directory, or the
    /// directory above a task's work directory.
    launch: Option<PathBuf>,
    /// What names the run on every node, once the history said (read at the start, and by
    /// a head at each classification until then).
    identity: Option<String>,
    /// Tasks named when they started, from their `.command.run`.
    named: HashMap<ProcKey, TaskInfo>,
    /// The run ids (work directories) of the tasks named so far.
    claimed: HashSet<String>,
    /// A head's work directory, where a task whose `.command.run` was not read as it
    /// started is found when it ends.
    work: Option<PathBuf>,
    /// A head's log, for how far the run is.
    log: Option<progress::LogProgress>,
}

fn start(image: &Image, _started: SystemTime, host: SharedHost) -> Box<dyn EngineRun> {
    let script = command_run(image);
    let task = script.as_deref().and_then(|s| read_task(&*host, s));
    start_task(host, image, script.as_deref().zip(task))
}

/// A Slurm batch script that is a task's `.command.run` (Nextflow submits it with
/// `sbatch .command.run` and `-D` its work directory; Slurm runs a copy from its spool): the
/// run of that task on this node.
pub(crate) fn under_batch(host: SharedHost, image: &Image) -> Option<Box<dyn EngineRun>> {
    let script = image.cwd.as_ref()?.join(".command.run");
    let task = read_task(&*host, &script)?;
    Some(start_task(host, image, Some((&script, task))))
}

/// A head (`task` None), or the run of one task whose `.command.run` is `script`.
fn start_task(
    host: SharedHost,
    image: &Image,
    task: Option<(&Path, TaskInfo)>,
) -> Box<dyn EngineRun> {
    let args = image.argv.get(1..).unwrap_or(&[]);
    let launch = match &task {
        // <launch>/<work>/<2 hex>/<30 hex>/.command.run
        Some((s, _)) => s.ancestors().nth(4).map(Path::to_path_buf),
        None => image.cwd.clone(),
    };
    let task_root = task.map(|(_, t)| t);
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
    let log = match (&task_root, &image.cwd) {
        (None, Some(cwd)) => Some(progress::LogProgress::new(
            host.clone(),
            log_file(cwd, args),
        )),
        _ => None,
    };
    let work = match (&task_root, &image.cwd) {
        (None, Some(cwd)) => Some(workdirs::work_dir(cwd, args)),
        _ => None,
    };
    Box::new(Nextflow {
        log,
        work,
        claimed: HashSet::new(),
        key: format!("{}-{key}", pipeline.replace('/', "_")),
        pipeline,
        identity: launch.as_deref().and_then(|l| running_in(&*host, l)),
        host,
        task_root,
        launch,
        named: HashMap::new(),
    })
}

/// The head's log: `-log FILE` (an option before the command), else `.nextflow.log`, in its
/// working directory.
fn log_file(cwd: &Path, args: &[String]) -> PathBuf {
    let command = args.iter().position(|a| a == "run");
    let options = &args[..command.unwrap_or(args.len())];
    let given = (options.iter().position(|a| a == "-log")).and_then(|i| args.get(i + 1));
    cwd.join(given.map_or(".nextflow.log", String::as_str))
}

/// The session id of a run's identity (`nextflow/<session>/<name>`).
fn session_of(identity: &str) -> Option<&str> {
    identity.strip_prefix("nextflow/")?.split('/').next()
}

/// The run Nextflow runs now from `launch`: the last record of its `.nextflow/history`, if
/// it has not ended (status `-`). What names the run on every node.
fn running_in(host: &dyn Host, launch: &Path) -> Option<String> {
    let text = host
        .read_to_string(&launch.join(".nextflow/history"))
        .ok()?;
    running_record(&text)
}

fn running_record(history: &str) -> Option<String> {
    let last = history.lines().rev().find(|l| !l.trim().is_empty())?;
    let cols: Vec<&str> = last.split('\t').collect();
    let (name, status, session) = (cols.get(2)?, cols.get(3)?, cols.get(5)?);
    let plausible = !name.is_empty() && *name != "-" && session.len() >= 32;
    (cols.len() == 7 && *status == "-" && plausible).then(|| format!("nextflow/{session}/{name}"))
}

/// Whether a shell runs the script file `name` (`bash -ue .command.run`, `bash
/// .command.run nxf_trace`, `bash -C -e -u -o pipefail /work/ab/cd.../.command.sh`).
fn runs_script(image: &Image, name: &str) -> bool {
    let shell = naming::executable_name(image.argv.first().map_or("", String::as_str));
    naming::shell_command(&image.argv).is_none()
        && naming::runs_shell(image)
        && naming::tool_name_of(shell, &image.argv) == name
}

/// Whether a shell runs a task's `.command.run`.
fn runs_command_run(image: &Image) -> bool {
    runs_script(image, ".command.run")
}

/// The `.command.run` a task's shell runs, made absolute with its working directory (None
/// when that is not known: a process gone before its directory could be read).
fn command_run(image: &Image) -> Option<std::path::PathBuf> {
    if !runs_command_run(image) {
        return None;
    }
    // The operand `runs_command_run` found (past `-o pipefail`-style option values).
    let script =
        (image.argv.iter().skip(1)).find(|a| naming::executable_name(a) == ".command.run")?;
    let path = Path::new(script);
    match (path.is_absolute(), &image.cwd) {
        (true, _) => Some(path.to_path_buf()),
        (false, Some(cwd)) => Some(cwd.join(path)),
        (false, None) => None,
    }
}

/// A task as its `.command.run` names it.
fn read_task(host: &dyn Host, path: &Path) -> Option<TaskInfo> {
    // The header is at the top; the rest of the file is the engine's wrapper script.
    let text = host.read_to_string(path).ok()?;
    let mut info = parse_header(text.lines().take(40))?;
    // On Slurm the executor's directives say what the task asked for (`cpus`, `memory`).
    let asks = super::sbatch::asks(text.lines().take(40));
    (info.threads, info.memory_bytes) = (asks.cpus, asks.memory_bytes);
    info.time_limit_s = asks.time_s;
    let dir = path.parent()?;
    let hash = dir.file_name()?.to_str()?;
    let prefix = dir.parent()?.file_name()?.to_str()?;
    if prefix.len() == 2 && hash.len() >= 6 {
        info.run_id = format!("{prefix}/{hash}");
    }
    // Where Nextflow keeps the task's stderr and its whole output.
    info.logs = [".command.err", ".command.log"]
        .map(|f| dir.join(f).to_string_lossy().into_owned())
        .into();
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

impl MultiNode for Nextflow {
    /// The head's run, or a task of it run by a batch scheduler on this node, named by the
    /// run its launch directory's history says runs now.
    fn shared(&self) -> Option<Shared> {
        let identity = self.identity.clone()?;
        let part = self.task_root.clone();
        Some(Shared { identity, part })
    }

    fn awaits_identity(&self) -> bool {
        false
    }
}

impl Wrapper for Nextflow {
    fn helper_in_task(&self, _image: &Image, _parent: &Image) -> bool {
        false
    }

    /// What a task's `.command.run` runs for itself, outside its script: staging, `tee`s of
    /// its output, `nxf_date`, `touch .command.begin`, and with task metrics on the
    /// wrapper re-entered (`bash .command.run nxf_trace`) sampling /proc every second.
    fn plumbing(&self, image: &Image, runner: &Image, runner_is_root: bool) -> bool {
        let wrapper = runs_command_run(runner) || (self.task_root.is_some() && runner_is_root);
        wrapper && !self.task_script(image)
    }

    /// The task's script, as `.command.run` (or its metrics wrapper) runs it.
    fn task_script(&self, image: &Image) -> bool {
        runs_script(image, ".command.sh")
    }
}

impl Nextflow {
    /// A task's `.command.run` not read as it started, found by its work directory.
    fn found_after(&mut self, e: &Ended) -> Option<TaskInfo> {
        let image = e.proc.image.as_ref().filter(|i| runs_command_run(i))?;
        let known = command_run(image).and_then(|path| read_task(&*self.host, &path));
        let work = self.work.as_deref()?;
        let info =
            known.or_else(|| workdirs::find(&*self.host, work, (e.start, e.end), &self.claimed))?;
        self.claimed.insert(info.run_id.clone());
        Some(info)
    }
}

impl EngineRun for Nextflow {
    fn wrapper(&self) -> Option<&dyn Wrapper> {
        Some(self)
    }

    fn multi_node(&self) -> Option<&dyn MultiNode> {
        Some(self)
    }

    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        self.pipeline.clone()
    }

    fn pipeline_key(&self) -> String {
        self.key.clone()
    }

    fn engine_version(&self) -> Option<String> {
        self.log.as_ref()?.version()
    }

    fn run_log(&self) -> Option<String> {
        self.log.as_ref().map(|l| l.path().display().to_string())
    }

    /// A head's tasks submitted, ended, and waiting in a grid scheduler, by its log.
    fn progress(&mut self) -> Option<super::Progress> {
        let log = self.log.as_mut()?;
        if self.identity.is_none() {
            self.identity = (self.launch.as_deref()).and_then(|l| running_in(&*self.host, l));
        }
        log.set_session(session_of(self.identity.as_deref()?)?);
        log.progress()
    }

    fn needs_cwd(&self, argv: &[String]) -> bool {
        argv.iter().any(|a| a == ".command.run")
    }

    /// A task of a run rooted on another node: what it runs is its own work.
    fn folds_helpers(&self) -> bool {
        self.task_root.is_none() || self.identity.is_none()
    }

    fn classify(&mut self, p: &Proc, image: &Image, _place: Place) -> Class {
        if self.identity.is_none() && self.task_root.is_none() {
            self.identity = (self.launch.as_deref()).and_then(|l| running_in(&*self.host, l));
        }
        // A task of a run rooted on another node is this run's span: its processes are its
        // tools.
        if self.task_root.is_some() && self.identity.is_some() {
            return Class::Undecided;
        }
        if let Some(t) = &self.task_root {
            // The task's own `.command.run` is the run: its script is the task.
            return match self.task_script(image) {
                true => {
                    self.named.insert(p.key, t.clone());
                    Class::Task
                }
                false => Class::Undecided,
            };
        }
        // A task whose header cannot be read (it ended before its directory was) is still a
        // task, named by its tool.
        match command_run(image).and_then(|path| read_task(&*self.host, &path)) {
            Some(info) => {
                self.claimed.insert(info.run_id.clone());
                self.named.insert(p.key, info);
                Class::Task
            }
            None if runs_command_run(image) => Class::Task,
            None => Class::Helper,
        }
    }

    /// `PROC (tag)`, as the task's span will be named.
    fn provisional(&mut self, task: &Proc) -> Option<String> {
        let t = self.named.get(&task.key)?;
        Some(match &t.tag {
            Some(tag) => format!("{} ({tag})", t.name),
            None => t.name.clone(),
        })
    }

    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        ended
            .iter()
            .map(|e| {
                let info = self
                    .named
                    .remove(&e.proc.key)
                    .or_else(|| self.found_after(e));
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
    use crate::disk_host::{DiskHost, shared as live};

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
    fn the_running_run_of_a_history_names_it_and_an_ended_one_does_not() {
        let uuid = "0b1d9c1e-6f7a-4c2b-9a55-3c0f1b2e4d6a";
        let ended =
            format!("2026-11-25 08:00:01\t1m 2s\tangry_curie\tOK\tabc123\t{uuid}\trun main.nf\n");
        let running =
            format!("2026-11-25 09:00:01\t-\tsad_turing\t-\tabc123\t{uuid}\trun main.nf -resume\n");
        assert_eq!(running_record(&ended), None);
        let both = format!("{ended}{running}\n");
        let id = running_record(&both).unwrap();
        assert_eq!(id, format!("nextflow/{uuid}/sad_turing"));
        assert_eq!(
            running_record(&format!("{running}{ended}")),
            None,
            "the last run ended"
        );
        assert_eq!(running_record("garbage\n"), None);
    }

    #[test]
    fn a_batch_script_in_a_task_directory_is_a_part_of_the_heads_run() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work/ab/0123456789abcdef0123456789abcd");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join(".command.run"),
            "#!/bin/bash\n# NEXTFLOW TASK: ALIGN (s1)\n",
        )
        .unwrap();
        let uuid = "0b1d9c1e-6f7a-4c2b-9a55-3c0f1b2e4d6a";
        std::fs::create_dir_all(dir.path().join(".nextflow")).unwrap();
        let line = format!("2026-11-25 09:00:01\t-\tsad_turing\t-\tabc\t{uuid}\trun main.nf\n");
        std::fs::write(dir.path().join(".nextflow/history"), line).unwrap();
        let batch = Image {
            path: "/bin/bash".into(),
            argv: ["/bin/bash", "/var/spool/slurmd/job00042/slurm_script"]
                .map(String::from)
                .to_vec(),
            cwd: Some(work.clone()),
            ..Default::default()
        };
        let task = under_batch(live(), &batch).expect("a Nextflow task");
        let shared = task
            .multi_node()
            .unwrap()
            .shared()
            .expect("named by the running run");
        assert_eq!(shared.identity, format!("nextflow/{uuid}/sad_turing"));
        assert_eq!(shared.part.unwrap().name, "ALIGN");
        let head = start(
            &Image {
                path: "/usr/bin/nextflow".into(),
                argv: ["nextflow", "run", "main.nf"].map(String::from).to_vec(),
                cwd: Some(dir.path().to_path_buf()),
                ..Default::default()
            },
            SystemTime::now(),
            live(),
        );
        assert_eq!(
            head.multi_node().unwrap().shared().unwrap().identity,
            shared.identity,
            "the head's too"
        );
        assert_eq!(head.multi_node().unwrap().shared().unwrap().part, None);
        let elsewhere = Image {
            cwd: Some(dir.path().to_path_buf()),
            ..batch
        };
        assert!(
            under_batch(live(), &elsewhere).is_none(),
            "no .command.run there"
        );
    }

    #[test]
    fn a_heads_log_is_its_launch_directorys_or_the_one_it_was_given() {
        let cwd = Path::new("/launch");
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            log_file(cwd, &args("/opt/nextflow run main.nf -resume")),
            cwd.join(".nextflow.log")
        );
        assert_eq!(
            log_file(cwd, &args("/opt/nextflow -log logs/nf.log run main.nf")),
            cwd.join("logs/nf.log")
        );
        assert_eq!(
            log_file(cwd, &args("run main.nf -log x")),
            cwd.join(".nextflow.log"),
            "a pipeline's option is no log"
        );
        let uuid = "0b1d9c1e-6f7a-4c2b-9a55-3c0f1b2e4d6a";
        assert_eq!(
            session_of(&format!("nextflow/{uuid}/sad_turing")),
            Some(uuid)
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
        let t = read_task(&DiskHost::default(), &command_run(&image).unwrap()).unwrap();
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
        // nf-core's process.shell: the option's value is no script.
        let shell = Image {
            argv: ["bash", "-C", "-e", "-u", "-o", "pipefail", ".command.run"]
                .map(String::from)
                .to_vec(),
            ..traced
        };
        assert_eq!(command_run(&shell), Some(work.join(".command.run")));
    }
}
