//! What to call a process: the program, or for an interpreter the script it runs.

pub use crate::facts::{executable_name, program_name};

#[derive(Debug, PartialEq, Eq)]
enum Family {
    Shell,
    Python,
    Java,
    Env,
    /// perl, ruby, node, Rscript, julia...: the first operand is the script.
    Script,
    Other,
}

fn family(name: &str) -> Family {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match trimmed {
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" => Family::Shell,
        "python" | "pypy" | "pypy3" => Family::Python,
        "java" => Family::Java,
        "env" => Family::Env,
        "perl" | "ruby" | "node" | "nodejs" | "Rscript" | "julia" | "php" | "tclsh" | "lua"
        | "awk" | "gawk" | "mawk" => Family::Script,
        _ => Family::Other,
    }
}

pub(crate) fn is_shell(path: &str) -> bool {
    family(executable_name(path)) == Family::Shell
}

/// Whether an image runs a shell: the shell itself, or a script the kernel started through
/// its `#!` line (the path is the script's, the interpreter argv[0], the script after it:
/// how Slurm starts a batch script).
pub(crate) fn runs_shell(image: &crate::tree::Image) -> bool {
    let interpreted = || {
        let (first, rest) = image.argv.split_first()?;
        Some(is_shell(first) && rest.contains(&image.path))
    };
    is_shell(&image.path) || interpreted().unwrap_or(false)
}

/// Whether a program is a Python interpreter (`python3`, `python3.11`, `pypy3`).
pub(crate) fn is_python(path: &str) -> bool {
    family(executable_name(path)) == Family::Python
}

/// The `-c` string of a shell command line, if it is one.
pub(crate) fn shell_command(argv: &[String]) -> Option<&str> {
    let name = executable_name(argv.first()?);
    if family(name) != Family::Shell {
        return None;
    }
    let mut args = argv[1..].iter();
    while let Some(a) = args.next() {
        if a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c')) {
            return args.next().map(String::as_str);
        }
        if !a.starts_with('-') {
            return None;
        }
    }
    None
}

/// True when `script` is one simple command: no list, pipe, background job or substitution.
/// Redirections keep it simple (`cmd > out` is still one command).
pub(crate) fn is_single_command(script: &str) -> bool {
    let (mut single, mut double) = (false, false);
    // Bytes, not chars: every character looked at is ASCII, and no byte of a multi-byte
    // character is (this runs for every process that ends in a task).
    let b = script.trim().as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            _ if single => {}
            b'`' => return false,
            b'$' if b.get(i + 1) == Some(&b'(') => return false,
            _ if double => {}
            b';' | b'|' | b'\n' | b'(' | b')' => return false,
            b'&' if b.get(i + 1) != Some(&b'>') && (i == 0 || b[i - 1] != b'>') => return false,
            _ => {}
        }
    }
    !b.is_empty()
}

/// A job script without the strict-mode prefix engines put before it (Snakemake's
/// `set -euo pipefail;`), which says nothing about the job.
pub(crate) fn strip_shell_prefix(command: &str) -> &str {
    let c = command.trim_start();
    c.strip_prefix("set -euo pipefail;").unwrap_or(c).trim()
}

/// Words of a simple shell command, quotes removed (enough to name it, not to run it).
pub(crate) fn shell_words(script: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut single, mut double, mut any) = (false, false, false);
    for c in script.chars() {
        match c {
            '\'' if !double => (single, any) = (!single, true),
            '"' if !single => (double, any) = (!double, true),
            c if c.is_whitespace() && !single && !double => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

fn first_operand<'a>(args: &'a [String], takes_value: &[&str]) -> Option<&'a String> {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if takes_value.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if a.starts_with('-') && a.len() > 1 {
            i += 1;
            continue;
        }
        return Some(a);
    }
    None
}

/// Flags after which an interpreter's argument is code, not a script: such a process is
/// named by the interpreter and the flag, never by the code.
const INLINE_CODE: &[&str] = &["-e", "-E", "--eval", "-p", "--print"];

/// `-e`, `--eval`, or a bundle of one-letter flags ending in `e` (`perl -ne`, `ruby -pe`).
fn is_inline_code_flag(a: &str) -> bool {
    INLINE_CODE.contains(&a)
        || (a.len() > 2
            && a.starts_with('-')
            && !a.starts_with("--")
            && a[1..].chars().all(|c| c.is_ascii_alphabetic())
            && (a.ends_with('e') || a.ends_with('E')))
}

/// Longest name a task or tool gets, in characters; longer ones end in `…`.
pub const MAX_NAME_CHARS: usize = 80;

/// A name safe for any display: control characters (newlines, tabs, escapes) become spaces,
/// runs of white space one space, and at most [`MAX_NAME_CHARS`] characters.
pub(crate) fn clean_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_NAME_CHARS * 4));
    let mut count = 0;
    let mut space = false;
    for c in name.trim().chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if count + usize::from(space) >= MAX_NAME_CHARS {
            out.push('…');
            return out;
        }
        if std::mem::take(&mut space) {
            out.push(' ');
            count += 1;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// The tool name of a process: its latest program, or its command name if it never exec'd.
pub fn proc_tool_name(p: &crate::tree::Proc) -> String {
    p.image
        .as_ref()
        .map(|i| tool_name_of(program_name(&i.path, &i.argv), &i.argv))
        .unwrap_or_else(|| clean_name(&p.comm))
}

/// Paths of version-manager shims and the scripts behind them (pyenv, rbenv, nodenv, jenv,
/// asdf, Lmod): what they run before the real program is not the user's work.
const SHIM_MARKERS: &[&str] = &[
    "/shims/",
    "/pyenv/libexec/",
    "/.pyenv/libexec/",
    "/rbenv/libexec/",
    "/.rbenv/libexec/",
    "/nodenv/libexec/",
    "/.nodenv/libexec/",
    "/jenv/libexec/",
    "/.jenv/libexec/",
    "/.asdf/bin/",
    "/asdf/libexec/",
    "/lmod/libexec/",
];

/// True while a process runs a version-manager shim (the program, or the script an
/// interpreter runs): the processes it starts then are folded into the tool it becomes.
pub(crate) fn is_shim(image: &crate::tree::Image) -> bool {
    let shim = |s: &str| SHIM_MARKERS.iter().any(|m| s.contains(m));
    shim(&image.path) || image.argv.iter().take(2).any(|a| shim(a))
}

/// Programs that start one command as their child and wait for it, adding nothing of their
/// own (`time`, `timeout`, `conda run`, `apptainer exec`): the command is the tool, the
/// wrapper no level. Wrappers that exec in place (`env`, `nice`, `ionice`, `taskset`) need
/// no such rule: a process is what it executed last.
pub(crate) fn is_wrapper(image: &crate::tree::Image) -> bool {
    let sub = image.argv.get(1).map(String::as_str).unwrap_or("");
    match program_name(&image.path, &image.argv) {
        "time" | "timeout" => true,
        "conda" | "mamba" | "micromamba" => sub == "run",
        "singularity" | "apptainer" => matches!(sub, "exec" | "run"),
        _ => false,
    }
}

/// The tool name of a command line whose program is `exe`, safe for display.
/// Commands the POSIX shells and bash run themselves, never as a program.
const SHELL_BUILTINS: &[&str] = &[
    ":",
    ".",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

fn is_shell_builtin(word: &str) -> bool {
    SHELL_BUILTINS.contains(&word)
}

pub(crate) fn tool_name_of(exe: &str, argv: &[String]) -> String {
    clean_name(&raw_tool_name(exe, argv))
}

fn raw_tool_name(exe: &str, argv: &[String]) -> String {
    let exe = if exe.is_empty() {
        argv.first().map(|a| executable_name(a)).unwrap_or("")
    } else {
        exe
    };
    let rest = argv.get(1..).unwrap_or(&[]);
    let script = |s: &String| executable_name(s).to_string();
    match family(exe) {
        Family::Shell => {
            if let Some(cmd) = shell_command(argv) {
                let words = shell_words(cmd);
                let execs = words.iter().any(|w| w == "exec");
                let words: Vec<String> = words
                    .into_iter()
                    .skip_while(|w| w == "exec" || w.contains('='))
                    .collect();
                // A builtin (`kill`, `exit`, `cd`, `echo`) runs inside the shell: it names
                // nothing; the shell is what ran. `exec kill` runs the program.
                let builtin = !execs && words.first().is_some_and(|w| is_shell_builtin(w));
                if is_single_command(cmd) && !words.is_empty() && !builtin {
                    return tool_name_of(executable_name(&words[0]), &words);
                }
                return exe.to_string();
            }
            first_operand(rest, &["-o", "+o", "-O", "+O"])
                .map(script)
                .unwrap_or(exe.into())
        }
        Family::Python => {
            if let Some(i) = rest.iter().position(|a| a == "-m") {
                return rest.get(i + 1).cloned().unwrap_or(exe.into());
            }
            if rest.iter().any(|a| a == "-c") {
                return format!("{exe} -c");
            }
            first_operand(rest, &["-W", "-X", "--check-hash-based-pycs"])
                .map(script)
                .unwrap_or(exe.into())
        }
        Family::Java => match rest.iter().position(|a| a == "-jar") {
            Some(i) => rest.get(i + 1).map(script).unwrap_or(exe.into()),
            None => first_operand(rest, &["-cp", "-classpath", "--class-path", "-p"])
                .cloned()
                .unwrap_or(exe.into()),
        },
        Family::Env => {
            let i = rest
                .iter()
                .position(|a| !a.starts_with('-') && !a.contains('='));
            match i {
                Some(i) => tool_name_of(executable_name(&rest[i]), &rest[i..]),
                None => exe.into(),
            }
        }
        Family::Script if rest.iter().any(|a| is_inline_code_flag(a)) => format!("{exe} -e"),
        // awk's first operand is its program: only `-f FILE` names a script.
        Family::Script
            if matches!(
                exe.trim_end_matches(|c: char| c.is_ascii_digit()),
                "awk" | "gawk" | "mawk"
            ) =>
        {
            rest.iter()
                .position(|a| a == "-f")
                .and_then(|i| rest.get(i + 1))
                .map(script)
                .unwrap_or(exe.into())
        }
        Family::Script => first_operand(rest, &["-f"])
            .map(script)
            .unwrap_or(exe.into()),
        Family::Other => exe.to_string(),
    }
}

/// The command line as one string, arguments with spaces or quotes single-quoted.
pub fn command_line(argv: &[String]) -> String {
    let quote = |a: &String| {
        if !a.is_empty() && !a.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
            a.clone()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(argv: &[&str]) -> String {
        let v: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        tool_name_of(executable_name(argv[0]), &v)
    }

    #[test]
    fn interpreters_are_named_by_their_script() {
        assert_eq!(name(&["python3", "call.py", "-x"]), "call.py");
        assert_eq!(
            name(&["/usr/bin/python3.11", "-u", "/opt/bin/call.py"]),
            "call.py"
        );
        assert_eq!(
            name(&["python3", "-m", "snakemake", "--cores"]),
            "snakemake"
        );
        assert_eq!(name(&["python3", "-c", "print(1)"]), "python3 -c");
        assert_eq!(name(&["Rscript", "--vanilla", "plot.R"]), "plot.R");
        assert_eq!(
            name(&["java", "-Xmx4g", "-jar", "/opt/picard.jar", "Sort"]),
            "picard.jar"
        );
        assert_eq!(name(&["bash", "-e", "step.sh", "a"]), "step.sh");
        assert_eq!(name(&["perl", "-w", "fix.pl"]), "fix.pl");
        assert_eq!(
            name(&["/usr/bin/env", "LC_ALL=C", "python3", "x.py"]),
            "x.py"
        );
        assert_eq!(name(&["samtools", "sort"]), "samtools");
    }

    #[test]
    fn inline_code_is_never_a_name() {
        assert_eq!(name(&["nodejs", "--eval", "var x = 1;\nx"]), "nodejs -e");
        assert_eq!(name(&["node", "-e", "1"]), "node -e");
        assert_eq!(name(&["perl", "-ne", "print if /x/", "f"]), "perl -e");
        assert_eq!(name(&["awk", "{print $1}", "f.txt"]), "awk");
        assert_eq!(name(&["gawk", "-f", "/x/sum.awk", "f"]), "sum.awk");
        assert_eq!(name(&["nodejs", "-v"]), "nodejs");
    }

    #[test]
    fn names_are_safe_to_display() {
        assert_eq!(clean_name("a\nb\tc\x1b[31m"), "a b c [31m");
        let long = "x".repeat(500);
        let cleaned = clean_name(&long);
        assert_eq!(cleaned.chars().count(), MAX_NAME_CHARS + 1);
        assert!(cleaned.ends_with('…'));
        assert_eq!(name(&["/tmp/a\nb.py"]), "a b.py");
        assert_eq!(name(&["python3", "/tmp/two\nlines.py"]), "two lines.py");
    }

    #[test]
    fn a_script_started_by_its_shebang_runs_its_shell() {
        let image = |path: &str, argv: &[&str]| crate::tree::Image {
            path: path.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        let spool = "/var/spool/slurmd/job00042/slurm_script";
        assert!(runs_shell(&image(spool, &["/bin/bash", spool])));
        assert!(runs_shell(&image("/bin/sh", &["sh", "-c", "x"])));
        assert!(!runs_shell(&image(spool, &["/usr/bin/python3", spool])));
        assert!(!runs_shell(&image("/usr/bin/sort", &["bash", "x"])));
    }

    #[test]
    fn shims_are_recognised() {
        let img = |path: &str, argv: &[&str]| crate::tree::Image {
            path: path.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        assert!(is_shim(&img(
            "/usr/bin/bash",
            &["bash", "/root/.pyenv/shims/python3", "x.py"]
        )));
        assert!(is_shim(&img(
            "/root/.pyenv/libexec/pyenv",
            &["pyenv", "exec"]
        )));
        assert!(!is_shim(&img(
            "/root/.pyenv/versions/3.11.7/bin/python3.11",
            &["python3", "x.py"]
        )));
    }

    #[test]
    fn a_shell_wrapping_one_command_is_named_by_it() {
        assert_eq!(
            name(&["sh", "-c", "samtools index a.bam > log 2>&1"]),
            "samtools"
        );
        assert_eq!(name(&["bash", "-c", "exec python3 run.py"]), "run.py");
        assert_eq!(name(&["bash", "-c", "a | b"]), "bash");
        assert_eq!(name(&["bash", "-c", "set -e; b"]), "bash");
        // BusyBox's applets and runc's init run through anonymous paths: argv[0] names them.
        let with_path = |path: &str, argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            tool_name_of(program_name(path, &argv), &argv)
        };
        assert_eq!(with_path("/proc/self/exe", &["sleep", "0.5"]), "sleep");
        assert_eq!(with_path("/proc/self/fd/6", &["runc", "init"]), "runc");
        assert_eq!(with_path("/usr/bin/env", &["env", "ls"]), "ls");
        // Builtins name nothing: the shell ran them.
        assert_eq!(name(&["bash", "-c", "kill -KILL $$"]), "bash");
        assert_eq!(name(&["sh", "-c", "exit 3"]), "sh");
        assert_eq!(name(&["bash", "-c", "exec kill -TERM 1"]), "kill");
        assert_eq!(name(&["bash", "-c", "/bin/kill -TERM 1"]), "kill");
    }

    #[test]
    fn single_command_detection() {
        assert!(is_single_command("bwa mem ref.fa 'a;b' > out.sam 2>&1"));
        assert!(!is_single_command("a && b"));
        assert!(!is_single_command("a & "));
        assert!(!is_single_command("echo $(date)"));
        assert!(!is_single_command("a | b"));
        assert!(is_single_command("echo '$(not run)'"));
        // Multi-byte characters around the bytes that matter.
        assert!(is_single_command("échö 'ü;ß' > ü.txt 2>&1"));
        assert!(!is_single_command("ü&ß"));
        assert!(!is_single_command("é $(ü)"));
    }

    #[test]
    fn command_line_quotes_what_needs_it() {
        let v: Vec<String> = ["bash", "-c", "a b", "it's"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(command_line(&v), r"bash -c 'a b' 'it'\''s'");
    }
}
