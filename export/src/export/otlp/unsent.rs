//! The file `pipetrace run` keeps what it could not deliver in when its flush window ends,
//! and `pipetrace send FILE` reads: the encoded OTLP requests themselves, as they were
//! queued (encoded once, sent as those bytes), spans first. A header names the format; each
//! record is its signal, its item count, its length and its bytes.
use std::{
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use pipetrace_config::SignalKind;

use super::Batch;

/// The first bytes of every such file.
const MAGIC: &[u8; 8] = b"PTUNSNT1";
/// A record's head: signal (1 byte), items and length (8 bytes each, little-endian).
const HEAD: usize = 17;

#[derive(Debug, thiserror::Error)]
pub enum UnsentError {
    #[error("cannot read {path}: {source}; give the file `pipetrace run` named at its end")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a file of undelivered telemetry (it must start as `pipetrace run` \
         writes it); give the file `pipetrace run` named at its end"
    )]
    NotOurs { path: String },
    #[error(
        "{path} ends inside a record at byte {at}: it was cut short; the records before \
         it are intact, but this file cannot be sent as it is"
    )]
    Truncated { path: String, at: usize },
}

fn code(kind: SignalKind) -> u8 {
    match kind {
        SignalKind::Traces => 1,
        SignalKind::Metrics => 2,
    }
}

/// Writes `batches` to `path` whole (a temporary name, then rename), readable by its owner
/// only: the requests hold command lines.
pub fn write<'a>(path: &Path, batches: impl IntoIterator<Item = &'a Batch>) -> std::io::Result<()> {
    crate::export::paths::make_folder_of(path)?;
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    let mut out = std::io::BufWriter::new(&mut f);
    out.write_all(MAGIC)?;
    for b in batches {
        out.write_all(&[code(b.kind)])?;
        out.write_all(&b.items.to_le_bytes())?;
        out.write_all(&(b.body.len() as u64).to_le_bytes())?;
        out.write_all(&b.body)?;
    }
    out.flush()?;
    drop(out);
    f.sync_data()?;
    std::fs::rename(&tmp, path)
}

/// The batches of a file [`write`] wrote, in its order.
pub fn read(path: &Path) -> Result<Vec<Batch>, UnsentError> {
    let shown = || path.display().to_string();
    let data = std::fs::read(path).map_err(|source| UnsentError::Read {
        path: shown(),
        source,
    })?;
    if !data.starts_with(MAGIC) {
        return Err(UnsentError::NotOurs { path: shown() });
    }
    let data = bytes::Bytes::from(data);
    let mut at = MAGIC.len();
    let mut out = Vec::new();
    while at < data.len() {
        let cut = UnsentError::Truncated { path: shown(), at };
        let Some(head) = data.get(at..at + HEAD) else {
            return Err(cut);
        };
        let kind = match head[0] {
            1 => SignalKind::Traces,
            2 => SignalKind::Metrics,
            _ => return Err(UnsentError::NotOurs { path: shown() }),
        };
        let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        let (items, len) = (word(1), word(9) as usize);
        let start = at + HEAD;
        if data.len() - start < len {
            return Err(cut);
        }
        out.push(Batch {
            kind,
            items,
            body: data.slice(start..start + len),
        });
        at = start + len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(kind: SignalKind, items: u64, body: &'static [u8]) -> Batch {
        Batch {
            kind,
            items,
            body: bytes::Bytes::from_static(body),
        }
    }

    #[test]
    fn batches_read_back_as_written_and_a_cut_or_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/run.unsent.pb");
        let written = [
            batch(SignalKind::Traces, 3, b"spans"),
            batch(SignalKind::Metrics, 1, b""),
            batch(SignalKind::Traces, 1, b"more spans"),
        ];
        write(&path, &written).unwrap();
        let back = read(&path).unwrap();
        let seen: Vec<_> = back
            .iter()
            .map(|b| (b.kind, b.items, b.body.clone()))
            .collect();
        let want: Vec<_> = written
            .iter()
            .map(|b| (b.kind, b.items, b.body.clone()))
            .collect();
        assert_eq!(seen, want);
        let data = std::fs::read(&path).unwrap();
        std::fs::write(&path, &data[..data.len() - 1]).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("cut short"), "{err}");
        std::fs::write(&path, b"{\"resourceSpans\":[]}").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(
            err.contains("is not a file of undelivered telemetry"),
            "{err}"
        );
    }
}
