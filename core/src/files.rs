//! The files a tool opened, and so a task's inputs and outputs: paths only, never contents.
//!
//! The open probes report every successful `openat` with its flags; here a path is kept or
//! left out (system paths, the user's globs), and each process keeps what it read and wrote,
//! bounded: the first paths listed, every distinct path counted.
use std::{
    collections::HashSet,
    hash::{BuildHasher, Hasher},
};

use globset::{Glob, GlobSet, GlobSetBuilder};

const O_ACCMODE: u32 = 3;
const O_WRONLY: u32 = 1;
const O_RDWR: u32 = 2;
/// Distinct paths remembered (as hashes) per set, to count them; past it, counted as new.
const SEEN_MAX: usize = 16_384;

/// How a file was opened: for reading, for writing, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub read: bool,
    pub write: bool,
}

impl Access {
    pub fn of_flags(flags: u32) -> Self {
        match flags & O_ACCMODE {
            O_WRONLY => Self {
                read: false,
                write: true,
            },
            O_RDWR => Self {
                read: true,
                write: true,
            },
            _ => Self {
                read: true,
                write: false,
            },
        }
    }
}

/// Prefixes of what the system, not the pipeline, provides or keeps.
const SYSTEM_PREFIXES: &[&str] = &[
    "/proc/",
    "/sys/",
    "/dev/",
    "/run/",
    "/usr/",
    "/lib/",
    "/lib32/",
    "/lib64/",
    "/libx32/",
    "/bin/",
    "/sbin/",
    "/etc/",
    "/var/lib/",
    "/var/cache/",
    "/opt/conda/pkgs/",
    "/nix/store/",
];
/// Parts of a path that mark an interpreter's libraries, caches or version-manager shims
/// (wherever installed: a venv, conda, a home directory). An engine's own bookkeeping is
/// the engine's to name ([`Bookkeeping`]).
const SYSTEM_PARTS: &[&str] = &[
    "/site-packages/",
    "/dist-packages/",
    "/__pycache__/",
    "/.cache/",
    "/node_modules/",
    "/lib/python",
    "/lib/perl",
    "/lib/R/",
    "/.pyenv/",
    "/.rbenv/",
    "/.asdf/",
    "/share/locale/",
];

/// An engine's own bookkeeping among the files its tasks open, not the pipeline's data: parts
/// of a path (Snakemake's `/.snakemake/`) and file names (Nextflow's `.command.run`). Each
/// engine declares its own; the filter is handed them all.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bookkeeping {
    pub parts: &'static [&'static str],
    pub names: &'static [&'static str],
}

/// Whether `path` is the system's (or, by `engines`, an engine's) rather than the
/// pipeline's data.
pub(crate) fn is_system(path: &str, engines: &[Bookkeeping]) -> bool {
    let anchored = if path.starts_with('/') {
        std::borrow::Cow::Borrowed(path)
    } else {
        std::borrow::Cow::Owned(format!("/{path}"))
    };
    let name = path.rsplit('/').next().unwrap_or(path);
    let shared_library = name.ends_with(".so") || name.contains(".so.");
    let engines_own =
        |b: &Bookkeeping| b.parts.iter().any(|p| anchored.contains(p)) || b.names.contains(&name);
    SYSTEM_PREFIXES.iter().any(|p| path.starts_with(p))
        || SYSTEM_PARTS.iter().any(|p| anchored.contains(p))
        || engines.iter().any(engines_own)
        || shared_library
        || name.ends_with(".pyc")
}

/// Which opened paths are kept: never the system's (unless asked), then the user's globs.
#[derive(Clone, Debug)]
pub struct Filter {
    system: bool,
    include: Option<GlobSet>,
    exclude: GlobSet,
    /// The engines' bookkeeping, left out as the system's files are.
    engines: Vec<Bookkeeping>,
    pub max_per_tool: usize,
    pub max_per_task: usize,
}

impl Default for Filter {
    fn default() -> Self {
        Self::new(&pipetrace_config::Files::default()).expect("no globs to fail")
    }
}

impl Filter {
    pub fn new(cfg: &pipetrace_config::Files) -> Result<Self, globset::Error> {
        let set = |globs: &[String]| -> Result<GlobSet, globset::Error> {
            let mut b = GlobSetBuilder::new();
            for g in globs {
                b.add(Glob::new(g)?);
            }
            b.build()
        };
        Ok(Self {
            system: cfg.system,
            include: (!cfg.include.is_empty())
                .then(|| set(&cfg.include))
                .transpose()?,
            exclude: set(&cfg.exclude)?,
            engines: Vec::new(),
            max_per_tool: cfg.max_per_tool,
            max_per_task: cfg.max_per_task,
        })
    }

    /// Leaves out the engines' bookkeeping too (unless `files.system` keeps all).
    pub fn with_engines(mut self, engines: impl IntoIterator<Item = Bookkeeping>) -> Self {
        self.engines.extend(engines);
        self
    }

    /// The path as kept (`./` and doubled slashes gone), or None when it is left out.
    pub fn keep(&self, path: &str) -> Option<String> {
        let path = normalise(path);
        if path.is_empty() || (!self.system && is_system(&path, &self.engines)) {
            return None;
        }
        if self.include.as_ref().is_some_and(|i| !i.is_match(&path)) {
            return None;
        }
        (!self.exclude.is_match(&path)).then_some(path)
    }
}

fn normalise(path: &str) -> String {
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = (path.split('/'))
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Distinct paths: the first `limit` listed in the order first seen, all of them counted.
#[derive(Clone, Debug, Default)]
pub struct PathSet {
    listed: Vec<String>,
    seen: HashSet<u64>,
    /// Paths past [`SEEN_MAX`], counted as distinct without being remembered.
    unsure: u64,
}

fn hash_of(path: &str) -> u64 {
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(path.as_bytes());
    h.finish()
}

impl PathSet {
    pub(crate) fn insert(&mut self, path: &str, limit: usize) {
        let h = hash_of(path);
        if self.seen.contains(&h) {
            return;
        }
        if self.seen.len() >= SEEN_MAX {
            self.unsure += 1;
            return;
        }
        self.seen.insert(h);
        if self.listed.len() < limit {
            self.listed.push(path.to_string());
        }
    }

    fn merge(&mut self, other: &PathSet, limit: usize) {
        for p in other.listed() {
            self.insert(p, limit);
        }
        for h in &other.seen {
            if self.seen.len() >= SEEN_MAX {
                self.unsure += u64::from(!self.seen.contains(h));
            } else {
                self.seen.insert(*h);
            }
        }
        self.unsure += other.unsure;
    }

    pub(crate) fn contains(&self, path: &str) -> bool {
        self.seen.contains(&hash_of(path))
    }

    /// Distinct paths, listed or not.
    pub(crate) fn count(&self) -> u64 {
        self.seen.len() as u64 + self.unsure
    }

    pub(crate) fn listed(&self) -> &[String] {
        &self.listed
    }

    /// Those not in `other`: (listed ones, count of all).
    pub(crate) fn minus(&self, other: &PathSet) -> (Vec<String>, u64) {
        let listed = (self.listed.iter())
            .filter(|p| !other.contains(p))
            .cloned()
            .collect();
        let count = self.seen.difference(&other.seen).count() as u64 + self.unsure;
        (listed, count)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count() == 0
    }
}

/// What one process, or one task's processes, opened for reading and for writing.
#[derive(Clone, Debug, Default)]
pub struct Files {
    pub read: PathSet,
    pub written: PathSet,
}

impl Files {
    pub(crate) fn add(&mut self, path: &str, access: Access, limit: usize) {
        if access.read {
            self.read.insert(path, limit);
        }
        if access.write {
            self.written.insert(path, limit);
        }
    }

    /// Adds another's (a tool's to its task's): its listed paths, and every path it counted.
    pub(crate) fn merge(&mut self, other: &Files, limit: usize) {
        self.read.merge(&other.read, limit);
        self.written.merge(&other.written, limit);
    }

    /// Read and never written here: (listed, count).
    pub fn inputs(&self) -> (Vec<String>, u64) {
        self.read.minus(&self.written)
    }

    /// Written here: (listed, count).
    pub fn outputs(&self) -> (Vec<String>, u64) {
        (self.written.listed().to_vec(), self.written.count())
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.written.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> Filter {
        let cfg = pipetrace_config::Files {
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        Filter::new(&cfg).unwrap()
    }

    #[test]
    fn access_follows_the_open_mode() {
        assert_eq!(
            Access::of_flags(0),
            Access {
                read: true,
                write: false
            }
        );
        // O_WRONLY|O_CREAT|O_TRUNC, as a shell's `>` opens.
        assert_eq!(
            Access::of_flags(0o1101),
            Access {
                read: false,
                write: true
            }
        );
        assert_eq!(
            Access::of_flags(2 | 0o100),
            Access {
                read: true,
                write: true
            }
        );
    }

    /// An engine's bookkeeping, as an engine of the collector declares it.
    const BOOKS: Bookkeeping = Bookkeeping {
        parts: &["/.books/"],
        names: &[".ledger"],
    };

    #[test]
    fn system_paths_and_engine_bookkeeping_are_left_out() {
        let f = filter(&[], &[]).with_engines([BOOKS]);
        for p in [
            "/etc/ld.so.cache",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/python3/dist-packages/snakemake/__init__.py",
            "/proc/self/stat",
            "/dev/null",
            "/home/u/venv/lib/python3.13/site-packages/yaml/x.py",
            "/w/.books/metadata/abc",
            ".books/log/x.log",
            "/w/work/3f/9a1c/.ledger",
            "/home/u/lib/libfoo.so.1.2",
            "/w/__pycache__/a.cpython-313.pyc",
            "/opt/conda/envs/x/lib/python3.11/os.py",
            "/root/.pyenv/libexec/pyenv-exec",
        ] {
            assert_eq!(f.keep(p), None, "{p}");
        }
        for p in [
            "reads/A.fq",
            "/data/ref.fa",
            "results/bam/A.sorted.bam",
            "/tmp/x.vcf",
        ] {
            assert!(f.keep(p).is_some(), "{p}");
        }
        // Without the engine, its bookkeeping is data like any other file.
        assert!(filter(&[], &[]).keep(".books/log/x.log").is_some());
        let all = Filter::new(&pipetrace_config::Files {
            system: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(all.keep("/etc/passwd").as_deref(), Some("/etc/passwd"));
    }

    #[test]
    fn paths_are_normalised_and_user_globs_apply() {
        let f = filter(&[], &["**/*.tmp*"]);
        assert_eq!(f.keep("./reads//A.fq").as_deref(), Some("reads/A.fq"));
        assert_eq!(f.keep("/data/./x.bam").as_deref(), Some("/data/x.bam"));
        assert_eq!(f.keep("results/bam/A.tmp.0000.bam"), None);
        let only_bams = filter(&["**/*.bam"], &[]);
        assert!(only_bams.keep("/data/x.bam").is_some());
        assert!(only_bams.keep("/data/x.fq").is_none());
    }

    #[test]
    fn sets_list_a_bounded_few_and_count_every_distinct_path() {
        let mut s = PathSet::default();
        for i in 0..10 {
            s.insert(&format!("f{i}"), 3);
            s.insert(&format!("f{i}"), 3);
        }
        assert_eq!(s.listed(), ["f0", "f1", "f2"]);
        assert_eq!(s.count(), 10);
    }

    #[test]
    fn a_tasks_inputs_are_what_it_read_and_never_wrote() {
        let (r, w, rw) = (
            Access::of_flags(0),
            Access::of_flags(1),
            Access::of_flags(2),
        );
        let mut bwa = Files::default();
        bwa.add("ref.fa", r, 8);
        bwa.add("A.fq", r, 8);
        let mut sort = Files::default();
        sort.add("A.tmp.bam", w, 8);
        sort.add("A.tmp.bam", r, 8);
        sort.add("A.bam", w, 8);
        sort.add("index.db", rw, 8);
        let mut task = Files::default();
        task.merge(&bwa, 8);
        task.merge(&sort, 8);
        assert_eq!(task.inputs(), (vec!["ref.fa".into(), "A.fq".into()], 2));
        let (outputs, n) = task.outputs();
        assert_eq!(n, 3);
        assert_eq!(outputs, ["A.tmp.bam", "A.bam", "index.db"]);
    }

    #[test]
    fn merging_counts_what_the_other_did_not_list() {
        let mut tool = Files::default();
        for i in 0..5 {
            tool.add(&format!("in{i}"), Access::of_flags(0), 2);
        }
        let mut task = Files::default();
        task.merge(&tool, 32);
        assert_eq!(task.read.count(), 5);
        assert_eq!(task.read.listed().len(), 2);
    }
}
