//! A host that reads real files and nothing else, for the tests of record readers that
//! write records into a temporary directory: no process, no clock, no Slurm.
use std::{
    fs, io,
    io::{Read, Seek, SeekFrom},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::SystemTime,
};

use crate::port::{AllocCell, FileFacts, Host, HostError, Live, ProcSnapshot, RecordCell, TcpLink};

pub struct DiskHost;

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
    fn live(&self, _: u32) -> Option<Live> {
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
    fn kept(&self, _: &std::ffi::OsStr) -> Option<Vec<u8>> {
        None
    }
    fn user_name(&self, _: u32) -> Option<String> {
        None
    }
}
