//! A host that reads real files and nothing else, for the tests of record readers that
//! write records into a temporary directory: no process, no clock, no Slurm.
use std::{
    fs, io,
    io::{Read, Seek, SeekFrom},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::SystemTime,
};

use crate::port::{
    AllocCell, Cell, Database, FileFacts, Host, HostError, ProcSnapshot, RecordCell, RunningUsage,
    TcpLink,
};

#[derive(Default)]
pub struct DiskHost {
    /// Copies of written files, as the host crate's keeper makes them (`keep`).
    kept: std::sync::Mutex<std::collections::BTreeMap<std::ffi::OsString, Vec<u8>>>,
}

impl DiskHost {
    /// Keeps a copy of a written file, as the host crate's keeper does when it sees it.
    pub(crate) fn keep(&self, name: &std::ffi::OsStr, bytes: &[u8]) {
        self.kept
            .lock()
            .unwrap()
            .insert(name.to_owned(), bytes.to_vec());
    }
}

impl Host for DiskHost {
    fn boottime_ns(&self) -> u64 {
        0
    }
    fn suspended_ns(&self) -> u64 {
        0
    }
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }
    fn processes(&self) -> Vec<ProcSnapshot> {
        Vec::new()
    }
    fn cwd(&self, _: u32) -> Option<PathBuf> {
        None
    }
    fn live(&self, _: u32) -> Option<RunningUsage> {
        None
    }
    fn open_files(&self, _: u32) -> Vec<PathBuf> {
        Vec::new()
    }
    fn tcp_links(&self, _: u32) -> Vec<TcpLink> {
        Vec::new()
    }
    fn affinity(&self, _: u32) -> Option<u32> {
        None
    }
    fn online_cpus(&self) -> u32 {
        1
    }
    fn cpu_busy_ticks(&self) -> Result<u64, HostError> {
        Ok(0)
    }
    fn ticks_per_s(&self) -> u64 {
        100
    }
    fn own_rss_bytes(&self) -> Option<u64> {
        None
    }
    fn slurm_allocation(&self, _: u32, _: u32, _: i64) -> AllocCell {
        AllocCell::default()
    }
    fn slurm_job(&self, _: u64) -> RecordCell {
        RecordCell::default()
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let mut f = fs::File::open(path)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut out = Vec::new();
        f.take(max as u64).read_to_end(&mut out)?;
        Ok(out)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect()
    }
    fn facts(&self, path: &Path) -> io::Result<FileFacts> {
        let m = fs::metadata(path)?;
        Ok(FileFacts {
            modified: m.modified()?,
            uid: m.uid(),
            is_dir: m.is_dir(),
            len: m.len(),
        })
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        fs::read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        fs::canonicalize(path)
    }
    fn keep_written(&self, _: &Path) {}
    fn kept(&self, name: &std::ffi::OsStr) -> Option<Vec<u8>> {
        self.kept.lock().unwrap().get(name).cloned()
    }
    fn user_name(&self, _: u32) -> Option<String> {
        None
    }

    fn open_database(&self, path: &Path) -> Option<Box<dyn Database>> {
        sqlite(path)
    }
    // A recorded machine holds no installed distributions.
    fn engine_version(&self, _: &str, _: &[String], _: &str) -> Option<String> {
        None
    }
}

/// The disk host, shared as attribution takes a host.
pub(crate) fn shared() -> crate::port::SharedHost {
    std::sync::Arc::new(DiskHost::default())
}

/// SQLite, for tests that write an engine's database (the host crate opens real ones).
struct TestSqlite(rusqlite::Connection);

pub(crate) fn sqlite(path: &Path) -> Option<Box<dyn Database>> {
    let conn = rusqlite::Connection::open(path).ok()?;
    Some(Box::new(TestSqlite(conn)))
}

impl Database for TestSqlite {
    fn rows(&self, sql: &str, params: &[&str]) -> Result<Vec<Vec<Cell>>, HostError> {
        use rusqlite::types::Value;
        let failed = |e: rusqlite::Error| HostError::Query {
            path: String::new(),
            message: e.to_string(),
        };
        let mut stmt = self.0.prepare(sql).map_err(failed)?;
        let n = stmt.column_count();
        let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
            (0..n)
                .map(|i| {
                    Ok(match r.get::<_, Value>(i)? {
                        Value::Null => Cell::Null,
                        Value::Integer(v) => Cell::Int(v),
                        Value::Real(v) => Cell::Real(v),
                        Value::Text(v) => Cell::Text(v),
                        Value::Blob(v) => Cell::Blob(v),
                    })
                })
                .collect()
        });
        rows.map_err(failed)?
            .collect::<Result<_, _>>()
            .map_err(failed)
    }
}
