//! Snakemake's own record of each finished job: `.snakemake/metadata/` holds one JSON file
//! per output (its name the output path in URL-safe base64, split into folders when long)
//! with the job's `rule`, its exact rendered `shellcmd`, and its `starttime` and `endtime`
//! (Unix seconds). A job with several outputs writes the same record for each.
//!
//! 7 and 8 write each record to a temporary file renamed over the record; 9 rewrites an
//! existing record in place, which leaves its folder's time as it was: a rerun in the same
//! directory (or a retried job) rewrites records without a new file. Those are looked at by
//! name: the record of each output the log's job blocks list, and the records older than
//! the run (a rerun may rewrite any of them; up to [`STALE_MAX`]).
use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use base64::Engine as _;

use crate::port::SharedHost;

/// One finished job as its metadata tells it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub rule: String,
    /// The rendered shell command (None for `script:`, `run:` and other non-shell jobs).
    pub shellcmd: Option<String>,
    pub start: SystemTime,
    pub end: SystemTime,
    pub outputs: Vec<String>,
    /// The rule's code, kept for jobs of no shell command: it names the script a
    /// `script:` job ran.
    pub code: Option<Code>,
    /// Snakemake's identity of the job (`job_hash`, 7 on): unique among a run's jobs.
    pub job: Option<u64>,
    /// Taken by the process (or the in-engine task) it names.
    pub claimed: bool,
}

/// How many records older than the run are looked at again by name (each a `stat` per
/// look): a directory of more outputs than this relies on the log's blocks for the rest.
const STALE_MAX: usize = 4096;
/// Up to this many are looked at on every refresh; more, once a second at most.
const STALE_EVERY_TIME: usize = 256;

/// A record's file written this long before the run started may still be the run's
/// (clocks and Snakemake's own stamps may differ by this much).
const FILE_SLACK: Duration = Duration::from_secs(2);
/// A job of the run started after the run did: a record of a job started earlier than
/// this before the run is an earlier run's (its marker's time is the coarse file clock).
const START_SLACK: Duration = Duration::from_millis(100);

/// What reading a record found.
#[derive(Debug, PartialEq)]
enum Took {
    /// This run's record, taken (or a file that is not a record: nothing to wait for).
    Whole,
    /// Not whole yet: being written.
    Partial,
    /// A job started before this run: an earlier run's record, which this run may yet
    /// rewrite in place (9) where it stands.
    Earlier,
}

/// The longest file name Snakemake writes: a longer record name is split into `@` folders
/// of this many characters (its `PC_NAME_MAX` less one, 255 on Linux's file systems).
const NAME_CHUNK: usize = 254;

/// The records of one run's working directory written since the run started.
pub struct Metadata {
    host: SharedHost,
    dir: PathBuf,
    not_before: SystemTime,
    /// When the run started: a record of a job started before is not its.
    started: SystemTime,
    /// Files read, with their modification time then.
    read: HashMap<PathBuf, SystemTime>,
    /// Folders listed: their modification time, and when they were listed.
    dirs: HashMap<PathBuf, (SystemTime, SystemTime)>,
    /// The folders in each (long output paths are split into folders).
    subdirs: HashMap<PathBuf, Vec<PathBuf>>,
    /// Records looked at by name until read anew: of outputs of logged jobs, and older
    /// than the run (relative to the metadata folder; see the module's note).
    expected: HashSet<PathBuf>,
    stale: HashSet<PathBuf>,
    stale_looked: Option<SystemTime>,
    pub records: Vec<Record>,
}

/// Where Snakemake keeps the record of `output`, relative to the metadata folder: its
/// URL-safe base64, split into `@`-prefixed folders when longer than a file name.
pub(crate) fn record_path(output: &str) -> PathBuf {
    let name = base64::engine::general_purpose::URL_SAFE.encode(output);
    let chunks: Vec<&str> = (name.as_bytes().chunks(NAME_CHUNK))
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    let mut path = PathBuf::new();
    for (i, c) in chunks.iter().enumerate() {
        match i + 1 < chunks.len() {
            true => path.push(format!("@{c}")),
            false => path.push(c),
        }
    }
    path
}

/// The output path a record's file name encodes, relative to the metadata folder.
fn output_of(rel: &Path) -> Option<String> {
    let joined: String = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .map(|c| c.trim_start_matches('@').to_string())
        .collect();
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(joined.as_bytes())
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(joined.as_bytes()))
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn seconds(v: Option<&serde_json::Value>) -> Option<SystemTime> {
    let s = v?.as_f64()?;
    (s.is_finite() && s > 0.0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s))
}

/// A rule's code as a record keeps it.
#[derive(Clone, Debug, PartialEq)]
pub enum Code {
    /// Its source text (8/9): `script: "scripts/plot.py"`.
    Text(String),
    /// Its compiled code, pickled (7): the script's path is among its constants.
    Pickled(Vec<u8>),
}

impl Code {
    fn of(code: &str) -> Self {
        match base64::engine::general_purpose::STANDARD.decode(code) {
            Ok(bytes) if bytes.starts_with(&[0x80]) => Code::Pickled(bytes),
            _ => Code::Text(code.to_string()),
        }
    }
}

impl Record {
    /// Whether the job ran the script named `name` (true when its code does not say).
    pub(crate) fn runs_script(&self, name: &str) -> bool {
        match &self.code {
            Some(Code::Text(t)) => names_file(t, name),
            Some(Code::Pickled(b)) => b.windows(name.len()).any(|w| w == name.as_bytes()),
            None => true,
        }
    }
}

/// Whether source text names the file `name` as a quoted path (`"scripts/plot.py"`): the
/// code of a `script:` rule, with or without its `script:` keyword.
fn names_file(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        matches!(before, Some('/' | '"' | '\'')) && matches!(after, Some('"' | '\''))
    })
}

/// A shell command as Snakemake stores it and as bash receives it: trailing white space and
/// indentation of continuation lines may differ, the words do not.
pub(crate) fn normalize(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Metadata {
    pub(crate) fn new(workdir: &Path, started: SystemTime, host: SharedHost) -> Self {
        Self {
            host,
            dir: workdir.join(".snakemake/metadata"),
            not_before: started.checked_sub(FILE_SLACK).unwrap_or(started),
            started,
            read: HashMap::new(),
            dirs: HashMap::new(),
            subdirs: HashMap::new(),
            expected: HashSet::new(),
            stale: HashSet::new(),
            stale_looked: None,
            records: Vec::new(),
        }
    }

    /// A job the log shows started: its outputs' records are looked at by name until
    /// written (in place, on 9, where they were there before).
    pub(crate) fn expect(&mut self, outputs: &[String]) {
        // 7's `dynamic()` outputs are logged as patterns (`{*}`): no record of that name.
        let named = outputs.iter().filter(|o| !o.contains("{*}"));
        self.expected.extend(named.map(|o| record_path(o)));
    }

    /// Follows the records to another working directory (a Snakefile's `workdir:`), from
    /// where they are read again.
    pub(crate) fn move_to(&mut self, workdir: &Path) {
        self.dir = workdir.join(".snakemake/metadata");
        self.read.clear();
        self.dirs.clear();
        self.subdirs.clear();
        self.stale.clear();
    }

    /// Reads the records written or rewritten since the last call.
    pub(crate) fn refresh(&mut self) {
        let now = self.host.now();
        let mut stack = vec![self.dir.clone()];
        while let Some(dir) = stack.pop() {
            // A folder unchanged since well before its last listing holds no new record
            // (a new file changes its folder's time; timestamps are coarse, so a recent
            // one is listed again). This keeps a run of many outputs cheap to follow.
            let Ok(modified) = self.host.facts(&dir).map(|f| f.modified) else {
                continue;
            };
            let settled = modified + Duration::from_secs(1);
            if let Some((seen, listed)) = self.dirs.get(&dir)
                && *seen == modified
                && settled < *listed
            {
                stack.extend(self.subdirs.get(&dir).into_iter().flatten().cloned());
                continue;
            }
            self.dirs.insert(dir.clone(), (modified, now));
            let Ok(entries) = self.host.list(&dir) else {
                continue;
            };
            for path in entries {
                let Ok(meta) = self.host.facts(&path) else {
                    continue;
                };
                if meta.is_dir {
                    let subs = self.subdirs.entry(dir.clone()).or_default();
                    if !subs.contains(&path) {
                        subs.push(path.clone());
                    }
                    stack.push(path);
                    continue;
                }
                if meta.modified < self.not_before {
                    if self.stale.len() < STALE_MAX
                        && let Ok(rel) = path.strip_prefix(&self.dir)
                    {
                        self.stale.insert(rel.to_path_buf());
                    }
                    continue;
                }
                self.consider(&path, meta.modified);
            }
        }
        self.look_by_name(now);
    }

    /// Reads a record written since the run started, unless read as it is already.
    fn consider(&mut self, path: &Path, modified: SystemTime) {
        if modified < self.not_before || self.read.get(path) == Some(&modified) {
            return;
        }
        let Some(rel) = path.strip_prefix(&self.dir).ok().map(Path::to_path_buf) else {
            return;
        };
        match self.add(path) {
            // A record caught mid-write (Snakemake 9 rewrites in place: truncated, then
            // written, often within one tick of the file's time) is looked at again by name
            // until it reads whole, rather than taken as read.
            Took::Partial => {
                self.expected.insert(rel);
                return;
            }
            // An earlier run's, written just before this one started (a rerun in place): a
            // job of this run may rewrite it in place, which no folder's time tells of. Its
            // job's record is still awaited.
            Took::Earlier => {
                if self.stale.len() < STALE_MAX {
                    self.stale.insert(rel);
                }
            }
            Took::Whole => {
                self.expected.remove(&rel);
                self.stale.remove(&rel);
            }
        }
        self.read.insert(path.to_path_buf(), modified);
    }

    /// The records rewritten in place, which no folder's time tells of.
    fn look_by_name(&mut self, now: SystemTime) {
        let due = (self.stale_looked)
            .is_none_or(|t| now.duration_since(t).unwrap_or_default() >= Duration::from_secs(1));
        let stale = self.stale.len() <= STALE_EVERY_TIME || due;
        if stale {
            self.stale_looked = Some(now);
        }
        let stale = self.stale.iter().filter(|_| stale);
        let names: Vec<PathBuf> = self.expected.iter().chain(stale).cloned().collect();
        for rel in names {
            let path = self.dir.join(&rel);
            if let Ok(f) = self.host.facts(&path)
                && !f.is_dir
            {
                self.consider(&path, f.modified);
            }
        }
    }

    /// Takes the record at `path`, if it is whole and this run's.
    fn add(&mut self, path: &Path) -> Took {
        let Some(output) = path.strip_prefix(&self.dir).ok().and_then(output_of) else {
            return Took::Whole;
        };
        let Ok(text) = self.host.read_to_string(path) else {
            return Took::Partial;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            return Took::Partial;
        };
        let Some(rule) = json.get("rule").and_then(|v| v.as_str()) else {
            return Took::Whole;
        };
        let Some(end) = seconds(json.get("endtime")) else {
            return Took::Whole;
        };
        // 7 records a job of `dynamic()` outputs with no start (`"starttime": null`).
        let start = seconds(json.get("starttime")).unwrap_or(end);
        if start + START_SLACK < self.started {
            return Took::Earlier;
        }
        let shellcmd = json
            .get("shellcmd")
            .and_then(|v| v.as_str())
            .map(normalize)
            .filter(|c| !c.is_empty());
        let code = (json.get("code").and_then(|v| v.as_str()))
            .filter(|_| shellcmd.is_none())
            .map(Code::of);
        let job = json.get("job_hash").and_then(|v| v.as_u64());
        // The other outputs of the same job carry the same record. Its identity, where the
        // record has one: two jobs of one `script:` rule (no shell command) can start within
        // one tick of the file clock, their start times equal (measured on 9).
        let same = |r: &&mut Record| {
            r.rule == rule
                && match (r.job, job) {
                    (Some(a), Some(b)) => a == b,
                    _ => r.start == start && r.shellcmd == shellcmd,
                }
        };
        if let Some(r) = self.records.iter_mut().find(same) {
            if !r.outputs.contains(&output) {
                r.outputs.push(output);
            }
            return Took::Whole;
        }
        self.records.push(Record {
            rule: rule.to_string(),
            shellcmd,
            start,
            end,
            code,
            job,
            outputs: vec![output],
            claimed: false,
        });
        Took::Whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(dir: &Path, output: &str, json: &str) {
        let name = base64::engine::general_purpose::URL_SAFE.encode(output);
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(name), json).unwrap();
    }

    /// Snakemake 9 rewrites a record in place: a look between the truncation and the write,
    /// within one tick of the file's time, reads it empty. It is looked at again until whole.
    #[test]
    fn a_record_caught_mid_write_is_read_again_though_its_time_did_not_move() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".snakemake/metadata");
        write(&dir, "out/s6.txt", "");
        let path = dir.join(base64::engine::general_purpose::URL_SAFE.encode("out/s6.txt"));
        let when = SystemTime::now();
        let touch = || {
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap()
        };
        touch();
        let mut m = Metadata::new(
            tmp.path(),
            SystemTime::UNIX_EPOCH,
            crate::disk_host::shared(),
        );
        m.refresh();
        assert!(m.records.is_empty(), "nothing whole to read yet");
        let rec = r#"{"rule": "py_job", "shellcmd": null, "code": "x", "starttime": 5.0, "endtime": 6.0}"#;
        fs::write(&path, rec).unwrap();
        touch();
        m.refresh();
        assert_eq!(m.records.len(), 1, "read again once whole");
        m.refresh();
        assert_eq!(m.records.len(), 1, "and then once only");
    }

    /// A rerun in place on 9: the record of an earlier run, written just before this run
    /// started, is not this run's (though its file is recent), and the job's own record,
    /// rewritten in place where it stands (its folder's time unmoved), is read.
    #[test]
    fn an_earlier_runs_record_does_not_stand_in_for_the_one_rewritten_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".snakemake/metadata");
        let secs = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        let started = SystemTime::now() - Duration::from_secs(1);
        let rec = |start: f64| {
            format!(
                r#"{{"rule": "py_job", "shellcmd": null, "code": "x", "starttime": {start}, "endtime": {}}}"#,
                start + 0.2
            )
        };
        let earlier = secs(started) - 1.5;
        write(&dir, "out/s2.py.txt", &rec(earlier));
        let path = dir.join(record_path("out/s2.py.txt"));
        let set_time = |p: &Path, t: SystemTime| {
            fs::File::open(p).unwrap().set_modified(t).unwrap();
        };
        set_time(&path, started - Duration::from_millis(500));
        // The folder's time long settled: only a look by name finds a rewrite in place.
        set_time(&dir, started - Duration::from_secs(60));
        let mut m = Metadata::new(tmp.path(), started, crate::disk_host::shared());
        m.expect(&["out/s2.py.txt".to_string()]);
        m.refresh();
        assert!(m.records.is_empty(), "an earlier run's: {:?}", m.records);
        fs::write(&path, rec(secs(started) + 0.5)).unwrap();
        set_time(&dir, started - Duration::from_secs(60));
        m.refresh();
        assert_eq!(
            m.records.len(),
            1,
            "the job's own record, rewritten in place"
        );
        assert!(m.records[0].start > started);
    }

    /// Two jobs of one `script:` rule whose start times fell within one tick of the file
    /// clock: two records (by `job_hash`), each with its own output, not one of both.
    #[test]
    fn jobs_of_one_script_rule_started_in_one_tick_stay_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".snakemake/metadata");
        let rec = |hash: u64| {
            format!(
                r#"{{"rule": "py_job", "shellcmd": null, "code": "x", "starttime": 5.25, "endtime": 6.0, "job_hash": {hash}}}"#
            )
        };
        write(&dir, "out/s1.py.txt", &rec(101));
        write(&dir, "out/s2.py.txt", &rec(102));
        write(&dir, "out/s2.log", &rec(102));
        let mut m = Metadata::new(
            tmp.path(),
            SystemTime::UNIX_EPOCH,
            crate::disk_host::shared(),
        );
        m.refresh();
        let mut outputs: Vec<Vec<String>> = (m.records.iter())
            .map(|r| {
                let mut o = r.outputs.clone();
                o.sort();
                o
            })
            .collect();
        outputs.sort();
        assert_eq!(
            outputs,
            [vec!["out/s1.py.txt"], vec!["out/s2.log", "out/s2.py.txt"]]
        );
    }

    #[test]
    fn records_are_read_once_and_grouped_by_job() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".snakemake/metadata");
        let rec = r#"{"rule": "index", "shellcmd": "bwa index ref.fa\n  ", "starttime": 1700000000.5, "endtime": 1700000001.25}"#;
        write(&dir, "ref.fa.bwt", rec);
        write(&dir, "ref.fa.amb", rec);
        let script = r#"{"rule": "plot", "shellcmd": null, "code": "        \"scripts/plot.py\"\n", "starttime": 1700000002.0, "endtime": 1700000003.0}"#;
        write(&dir, "plots/a.png", script);
        let mut m = Metadata::new(
            tmp.path(),
            SystemTime::UNIX_EPOCH,
            crate::disk_host::shared(),
        );
        m.refresh();
        m.refresh();
        assert_eq!(m.records.len(), 2, "{:?}", m.records);
        let long = format!("long/{}.txt", "x".repeat(300));
        let name = base64::engine::general_purpose::URL_SAFE.encode(&long);
        let (head, tail) = name.split_at(254);
        fs::create_dir_all(dir.join(format!("@{head}"))).unwrap();
        let rec = r#"{"rule": "l", "shellcmd": "touch x", "starttime": 5.0, "endtime": 6.0}"#;
        fs::write(dir.join(format!("@{head}")).join(tail), rec).unwrap();
        assert_eq!(
            record_path(&long),
            Path::new(&format!("@{head}")).join(tail),
            "where Snakemake writes it"
        );
        m.refresh();
        let l = m
            .records
            .iter()
            .find(|r| r.rule == "l")
            .expect("a record written later");
        assert_eq!(
            l.outputs,
            [long],
            "long output paths are split into folders"
        );
        assert_eq!(m.records.len(), 3);
        let index = m.records.iter().find(|r| r.rule == "index").unwrap();
        assert_eq!(index.shellcmd.as_deref(), Some("bwa index ref.fa"));
        let mut outs = index.outputs.clone();
        outs.sort();
        assert_eq!(outs, ["ref.fa.amb", "ref.fa.bwt"]);
        let plot = m.records.iter().find(|r| r.rule == "plot").unwrap();
        assert_eq!(
            (plot.shellcmd.as_ref(), plot.outputs.as_slice()),
            (None, &["plots/a.png".to_string()][..])
        );
        assert!(plot.runs_script("plot.py") && !plot.runs_script("summ.py"));
        assert!(!plot.runs_script("ot.py"), "a whole file name");
        let mut pickled = plot.clone();
        // Snakemake 7's pickled code object, cut to where it holds the script's path.
        pickled.code = Some(Code::of("gASVEwAAAAAAAACMD3NjcmlwdHMvcGxvdC5weZQu"));
        assert!(pickled.runs_script("plot.py") && !pickled.runs_script("summ.py"));
    }

    #[test]
    fn records_older_than_the_run_are_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".snakemake/metadata");
        write(
            &dir,
            "old.txt",
            r#"{"rule": "x", "shellcmd": "true", "starttime": 1.0, "endtime": 2.0}"#,
        );
        let mut m = Metadata::new(
            tmp.path(),
            SystemTime::now() + Duration::from_secs(60),
            crate::disk_host::shared(),
        );
        m.refresh();
        assert!(m.records.is_empty());
    }
}
