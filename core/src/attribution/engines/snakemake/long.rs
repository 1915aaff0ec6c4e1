//! Shell commands too long for a command line. Snakemake 7 to 9 (`shell.py`) write a
//! command whose quoted length passes `MAX_ARG_LEN` (16 * 4096 - 1 bytes) to
//! `.snakemake/shell_tmp.XXXXXXXX/script.sh` and run `"<bash>" "<abs path>/script.sh"`
//! instead; the folder is removed once the job ends. The file holds the command exactly as
//! it would have run (the strict-mode prefix and the rendered command): read as the job is
//! first seen, it is the job's command. A job that ended before it was seen is matched by
//! the records that could have run so: commands over that length (see `Records::long`).
use std::path::Path;

use crate::{attribution::naming::strip_shell_prefix, port::SharedHost};

use super::metadata::normalize;

/// Snakemake's `MAX_ARG_LEN`.
const MAX_ARG_LEN: usize = 16 * 4096 - 1;

/// The most read of a script: more than any command line, within an agent's means.
const READ_AT_MOST: usize = 16 << 20;

/// The script a job's command (or its argument) runs from `.snakemake/shell_tmp.*`.
pub(crate) fn script_in(command: &str) -> Option<&str> {
    let at = command.find(".snakemake/shell_tmp.")?;
    let start = command[..at].rfind([' ', '\'', '"']).map_or(0, |i| i + 1);
    let end = at + command[at..].find("/script.sh")? + "/script.sh".len();
    Some(&command[start..end])
}

/// The job's command as the script holds it (prefix off, white space folded), read from
/// `path` (relative ones from `workdir`).
pub(crate) fn read(host: &SharedHost, workdir: &Path, path: &str) -> Option<String> {
    let bytes = host.read_from(&workdir.join(path), 0, READ_AT_MOST).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(normalize(strip_shell_prefix(&text)))
}

/// Whether Snakemake would have run a recorded command from a script: its length quoted,
/// with the strict-mode prefix (or a `shell.prefix` of about its size) is over the limit.
/// A little under, so that a longer prefix does not hide one.
pub(crate) fn runs_from_file(recorded: &str) -> bool {
    let quoted = recorded.len() + 3 * recorded.matches('\'').count() + 2;
    quoted + "set -euo pipefail; ".len() > MAX_ARG_LEN - 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_is_read_from_its_script() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join(".snakemake/shell_tmp.ab_cd12/");
        std::fs::create_dir_all(&tmp).unwrap();
        let cmd = format!("echo {} > out/x.txt", "w ".repeat(40_000));
        std::fs::write(
            tmp.join("script.sh"),
            format!("set -euo pipefail;  {cmd}\n"),
        )
        .unwrap();
        let abs = format!(
            "{}/.snakemake/shell_tmp.ab_cd12/script.sh",
            dir.path().display()
        );
        let line = format!("set -euo pipefail;  \"/usr/bin/bash\" \"{abs}\"");
        assert_eq!(script_in(&line), Some(abs.as_str()));
        assert_eq!(script_in(&abs), Some(abs.as_str()), "bash's argument");
        assert_eq!(script_in("echo .snakemake/shell_tmp.x"), None);
        let host = crate::disk_host::shared();
        assert_eq!(read(&host, dir.path(), &abs), Some(normalize(&cmd)));
        assert!(runs_from_file(&cmd) && !runs_from_file("echo hi"));
    }
}
