//! What a `script:` job is, from the script Snakemake wrote for it. Snakemake 7 and 9 run
//! each `script:` job from a temporary copy, `.snakemake/scripts/tmpXXXXXXXX.NAME`, its
//! preamble holding the job's own input, output, params and wildcards: bash as
//! `declare -A snakemake_output=( [0]="sh/s1.txt" )` (9: unquoted), Python as a pickled
//! `snakemake` object whose paths are plain strings in the bytes' text. The copy lives only
//! while the job runs: it is read as the job's process is first seen, and where the job
//! ended before that (a short job, a loaded machine), from the host's copy taken as
//! Snakemake wrote it (the run asks the host to keep `.snakemake/scripts`).
//!
//! Records of jobs of one script tell nothing else apart: their start is when Snakemake
//! marked the job, which does not order the processes (each executor thread starts its own).
use std::path::Path;

use crate::port::SharedHost;

/// Where the job's outputs start in a preamble: bash, Python's pickle (as text), R.
/// Inputs come before them, so a job's inputs do not pass for its outputs.
const OUTPUTS_FROM: [&str; 3] = ["snakemake_output=", "\\x06output\\x94", "output = list("];

/// A preamble is at the start of the copy, outputs early in it.
const READ_AT_MOST: usize = 1 << 20;
/// What is kept: the outputs and what follows them closely.
const KEEP_AT_MOST: usize = 64 << 10;

/// The temporary script a command runs: the path that names `.snakemake/scripts/tmp`.
pub(crate) fn path_in(command: &str) -> Option<&str> {
    let at = command.find(".snakemake/scripts/tmp")?;
    let start = command[..at]
        .rfind([' ', '\'', '"', '='])
        .map_or(0, |i| i + 1);
    let len = command[start..]
        .find([' ', '\'', '"', ';'])
        .unwrap_or(command.len() - start);
    Some(&command[start..start + len])
}

/// The part of the job's script that names its outputs, read through `host` (relative
/// paths from `workdir`), or from the host's copy once Snakemake deleted it. None when
/// neither is there.
pub(crate) fn outputs_text(host: &SharedHost, workdir: &Path, command: &str) -> Option<String> {
    let path = workdir.join(path_in(command)?);
    let bytes = match host.read_from(&path, 0, READ_AT_MOST) {
        Ok(b) => b,
        Err(_) => host.kept(path.file_name()?)?,
    };
    let text = String::from_utf8_lossy(&bytes);
    let from = (OUTPUTS_FROM.iter())
        .find_map(|m| text.find(m))
        .unwrap_or(0);
    let mut end = (from + KEEP_AT_MOST).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[from..end].to_string())
}

/// How well a record's outputs fit the job's script: every output named, the longer the
/// better (an output that is a part of another's path, `a/x` in `data/a/x`, loses to it).
pub(crate) fn fit(text: &str, outputs: &[String]) -> Option<usize> {
    let named = !outputs.is_empty() && outputs.iter().all(|o| text.contains(o.as_str()));
    named.then(|| outputs.iter().map(String::len).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_path_is_found_in_the_command() {
        let cmd = "set -euo pipefail;  bash /w/.snakemake/scripts/tmpkrroz4hm.work.sh";
        assert_eq!(
            path_in(cmd),
            Some("/w/.snakemake/scripts/tmpkrroz4hm.work.sh")
        );
        let cmd = "set -euo pipefail;  Rscript --vanilla '.snakemake/scripts/tmpab_cd.p.R'";
        assert_eq!(path_in(cmd), Some(".snakemake/scripts/tmpab_cd.p.R"));
        assert_eq!(path_in("echo hi"), None);
    }

    #[test]
    fn outputs_are_read_from_the_preamble_after_the_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let scripts = dir.path().join(".snakemake/scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        let bash = "declare -A snakemake_input=( [0]=\"sh/s2.txt\" )\ndeclare -A snakemake_output=( [0]=\"sh/s1.txt\" )\n";
        std::fs::write(scripts.join("tmp1.work.sh"), bash).unwrap();
        let host = crate::disk_host::shared();
        let cmd = "set -euo pipefail;  bash .snakemake/scripts/tmp1.work.sh";
        let text = outputs_text(&host, dir.path(), cmd).unwrap();
        assert!(fit(&text, &["sh/s1.txt".into()]).is_some());
        assert_eq!(fit(&text, &["sh/s2.txt".into()]), None, "an input only");
        let gone = "bash .snakemake/scripts/tmp2.work.sh";
        assert_eq!(outputs_text(&host, dir.path(), gone), None);
        assert!(fit("x data/a/x", &["data/a/x".into()]) > fit("x data/a/x", &["a/x".into()]));
    }
}
