//! Snakemake's cluster execution (7's `--cluster`, 8/9's executor plugins): the head writes
//! each job as a job script into a directory of this run's own, `.snakemake/tmp.XXXXXXXX`,
//! made at its first submission, and submits it with the user's command; each job then runs
//! `snakemake --target-jobs` on some node, naming that directory first among the files it
//! waits for (`--wait-for-files DIR ...`, or a file in it with `--wait-for-files-file`).
//! That directory, absolute as both spell it, names the run alike on every node.
use crate::{attribution::naming, tree::Image};

/// Options whose value is a command the head runs to submit, check or cancel jobs.
const COMMANDS: &[&str] = &[
    "--cluster",
    "--cluster-sync",
    "--cluster-status",
    "--cluster-cancel",
    "--cluster-sidecar",
    "--cluster-generic-submit-cmd",
    "--cluster-generic-status-cmd",
    "--cluster-generic-cancel-cmd",
    "--cluster-generic-sidecar-cmd",
];

/// Options of 7 that send jobs to a scheduler without a command of the user's.
const SCHEDULERS: &[&str] = &[
    "--drmaa",
    "--slurm",
    "--kubernetes",
    "--tibanna",
    "--google-lifesciences",
    "--flux",
    "--az-batch",
];

/// Executors of 8/9 that run jobs in the head's own process tree.
const LOCAL_EXECUTORS: &[&str] = &["local", "dryrun", "touch"];

/// A head that submits jobs: what it runs for that, and the run's directory once known.
#[derive(Debug, Default)]
pub struct Head {
    /// Its command line says it submits jobs (its spans wait for the run's identity).
    pub submits: bool,
    /// The programs of the commands it was given to submit, check and cancel jobs.
    programs: Vec<String>,
    /// The run's directory, learnt at the first submission.
    pub dir: Option<String>,
}

impl Head {
    pub(crate) fn of(argv: &[String]) -> Self {
        let value = |name: &str| {
            argv.iter()
                .zip(argv.iter().skip(1))
                .find(|(a, _)| *a == name)
                .map(|(_, v)| v.as_str())
                .or_else(|| {
                    let prefix = format!("{name}=");
                    argv.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
                })
        };
        let programs: Vec<String> = COMMANDS
            .iter()
            .filter_map(|o| value(o))
            .filter_map(|cmd| naming::shell_words(cmd).into_iter().next())
            .collect();
        let executor = value("--executor").or_else(|| value("-e"));
        let submits = !programs.is_empty()
            || argv.iter().any(|a| SCHEDULERS.contains(&a.as_str()))
            || executor.is_some_and(|e| !LOCAL_EXECUTORS.contains(&e));
        Self {
            submits,
            programs,
            dir: None,
        }
    }

    /// Whether the head's child running `image` submits, checks or cancels jobs: a command
    /// naming a job script in the run's directory (learnt from the first), or running one of
    /// the programs the head was given for that.
    pub(crate) fn is_submission(&mut self, image: &Image) -> bool {
        let words = command_words(image);
        if let Some(dir) = words.iter().find_map(|w| run_dir(w)) {
            self.dir.get_or_insert_with(|| dir.to_string());
            return true;
        }
        let first = words.first().map(|w| naming::executable_name(w));
        first.is_some_and(|f| (self.programs.iter()).any(|p| naming::executable_name(p) == f))
    }
}

/// Whether a command names a file in a cluster run's directory (a job marking its end).
pub(crate) fn names_run_dir(image: &Image) -> bool {
    command_words(image).iter().any(|w| run_dir(w).is_some())
}

/// A command line's words, the `-c` script's for a shell.
fn command_words(image: &Image) -> Vec<String> {
    match naming::shell_command(&image.argv) {
        Some(script) => naming::shell_words(script),
        None => image.argv.clone(),
    }
}

/// The run directory a word names, `/abs/.snakemake/tmp.XXXXXXXX`: a path in it, or an
/// option or command holding one (`--wrap="... --wait-for-files '/abs/.snakemake/tmp.X'"`).
fn run_dir(word: &str) -> Option<&str> {
    let at = word.find("/.snakemake/tmp.")?;
    let delimiter = |c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '=');
    let start = word[..at].rfind(delimiter).map_or(0, |i| i + 1);
    let from = at + "/.snakemake/".len();
    let end = word[from..]
        .find(|c: char| c == '/' || delimiter(c))
        .map_or(word.len(), |i| from + i);
    let dir = &word[start..end];
    (dir.starts_with('/') && end > from + "tmp.".len()).then_some(dir)
}

/// The run directory a remote job (`snakemake --target-jobs`) names among the files it
/// waits for, if it names one.
pub(crate) fn remote_dir(argv: &[String]) -> Option<String> {
    let i = argv
        .iter()
        .position(|a| a == "--wait-for-files" || a == "--wait-for-files-file")?;
    let files = argv[i + 1..].iter().take_while(|a| !a.starts_with("--"));
    files.filter_map(|f| run_dir(f)).next().map(str::to_string)
}

/// The working directory the run directory lies in (where the records are).
pub(crate) fn workdir(dir: &str) -> &str {
    dir.rsplit_once("/.snakemake/").map_or(dir, |(w, _)| w)
}

/// What names the run on every node.
pub(crate) fn identity(dir: &str) -> String {
    format!("snakemake/{dir}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    fn sh(script: &str) -> Image {
        Image {
            path: "/bin/sh".into(),
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            ..Default::default()
        }
    }

    // The command lines below are as Snakemake 7.21 and 9.27 (cluster-generic) ran them.
    #[test]
    fn a_head_that_submits_is_told_by_its_options() {
        for argv in [
            "snakemake --cluster sbatch --jobs 2",
            "snakemake --executor cluster-generic --cluster-generic-submit-cmd qsub -j 4",
            "snakemake -e slurm -j 10",
            "snakemake --executor=slurm",
            "snakemake --kubernetes",
        ] {
            assert!(Head::of(&words(argv)).submits, "{argv}");
        }
        for argv in [
            "snakemake --cores 2",
            "snakemake -e local -c1",
            "snakemake -n",
        ] {
            assert!(!Head::of(&words(argv)).submits, "{argv}");
        }
    }

    #[test]
    fn a_submission_names_the_run_directory_and_status_checks_are_the_heads_too() {
        let mut head = Head::of(&[
            "snakemake".into(),
            "--cluster".into(),
            "sbatch -o log/%j.out --cpus-per-task {threads}".into(),
            "--cluster-status".into(),
            "./status.py".into(),
        ]);
        let job = sh("sbatch -o log/%j.out --cpus-per-task 1 \
                      /w/x/.snakemake/tmp.4s7uhwm5/snakejob.count.2.sh");
        assert!(head.is_submission(&job));
        assert_eq!(head.dir.as_deref(), Some("/w/x/.snakemake/tmp.4s7uhwm5"));
        assert!(head.is_submission(&sh("./status.py '42'")));
        let local = sh("set -euo pipefail;  seq 1 1000 > out/ref.txt");
        assert!(!head.is_submission(&local));
        // 9's cluster-generic quotes the job script.
        let mut nine = Head::of(&words("snakemake --executor cluster-generic"));
        let quoted = sh("./sub.sh \"/w/x/.snakemake/tmp.2qjc9_ug/snakejob.sum.1.sh\"");
        assert!(nine.is_submission(&quoted));
        assert_eq!(nine.dir.as_deref(), Some("/w/x/.snakemake/tmp.2qjc9_ug"));
        // The Slurm plugin wraps the job's command in sbatch's own option.
        let mut slurm = Head::of(&words("snakemake --executor slurm"));
        let wrap = sh(
            "sbatch --job-name 5d1 --wrap=\"srun -n1 python -m snakemake \
                       --target-jobs 'a:i=1' --wait-for-files '/w/x/.snakemake/tmp.z9' 'in'\"",
        );
        assert!(slurm.is_submission(&wrap));
        assert_eq!(slurm.dir.as_deref(), Some("/w/x/.snakemake/tmp.z9"));
    }

    #[test]
    fn a_remote_job_names_its_runs_directory_in_both_forms() {
        let seven = words(
            "/usr/bin/python3 -m snakemake --snakefile /w/x/Snakefile --target-jobs count:s=A \
             --wait-for-files /w/x/.snakemake/tmp.4s7uhwm5 out/ref.txt --force --mode 2",
        );
        assert_eq!(
            remote_dir(&seven).as_deref(),
            Some("/w/x/.snakemake/tmp.4s7uhwm5")
        );
        let many = words(
            "python -m snakemake --target-jobs a:i=1 --wait-for-files-file \
             /w/x/.snakemake/tmp.abc/snakejob.a.1.sh.waitforfilesfile.txt --mode remote",
        );
        assert_eq!(
            remote_dir(&many).as_deref(),
            Some("/w/x/.snakemake/tmp.abc")
        );
        let local = words("python -m snakemake --target-jobs a:i=1 --wait-for-files out/x");
        assert_eq!(remote_dir(&local), None);
        assert_eq!(workdir("/w/x/.snakemake/tmp.abc"), "/w/x");
    }
}
