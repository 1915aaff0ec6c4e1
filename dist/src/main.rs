//! Writes what the Debian package and the release tarball hold beside the binary (man pages,
//! shell completions, the commented config), from the definitions the binary itself is built
//! from, so that none can go stale (`make dist`).
//!
//!   OUT/man/pipetrace.1, OUT/man/pipetrace-<subcommand>.1   from `pipetrace::cli::command()`
//!   OUT/completions/{pipetrace.bash,_pipetrace,pipetrace.fish}   the same, for bash, zsh, fish
//!   OUT/config.yaml   every key commented out at its default (`pipetrace_config::etc_file`)
//!
//! scripts/dist.sh runs it (`make dist`); usage: pipetrace-dist-assets OUT
use std::{
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap_complete::Shell;

/// The shells a completion is written for, and the file name each one's loader looks for.
const COMPLETIONS: &[(Shell, &str)] = &[
    (Shell::Bash, "pipetrace.bash"),
    (Shell::Zsh, "_pipetrace"),
    (Shell::Fish, "pipetrace.fish"),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = args.as_slice() else {
        eprintln!("usage: pipetrace-dist-assets OUT (a directory; scripts/dist.sh runs this)");
        return ExitCode::from(2);
    };
    match write_all(Path::new(out)) {
        Ok(written) => {
            for p in written {
                println!("{}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pipetrace-dist-assets: {out}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes every asset under `out`; the files written.
fn write_all(out: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = man_pages(&out.join("man"))?;
    written.extend(completions(&out.join("completions"))?);
    let config = out.join("config.yaml");
    fs::write(&config, pipetrace_config::etc_file::commented_out())?;
    written.push(config);
    Ok(written)
}

/// One page for `pipetrace` and one per subcommand (as git's), roff, uncompressed.
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    clap_mangen::generate_to(pipetrace::cli::command(), dir)?;
    let mut pages: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    pages.sort();
    Ok(pages)
}

fn completions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (shell, name) in COMPLETIONS {
        let mut text = Vec::new();
        clap_complete::generate(
            *shell,
            &mut pipetrace::cli::command(),
            "pipetrace",
            &mut text,
        );
        let path = dir.join(name);
        fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_per_subcommand_and_a_completion_per_shell() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_all(dir.path()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for sub in pipetrace::cli::command().get_subcommands() {
            let page = format!("pipetrace-{}.1", sub.get_name());
            assert!(names.contains(&page), "no {page} in {names:?}");
        }
        let main = fs::read_to_string(dir.path().join("man/pipetrace.1")).unwrap();
        assert!(main.contains(".TH pipetrace 1"), "{main}");
        let bash = fs::read_to_string(dir.path().join("completions/pipetrace.bash")).unwrap();
        assert!(
            bash.contains("complete -F") && bash.contains("doctor"),
            "{bash}"
        );
    }
}
