//! What to call a process: the program, or for an interpreter the script it runs.

/// File name of a path (`/usr/bin/samtools` -> `samtools`).
pub fn executable_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

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
        | "awk" | "gawk" => Family::Script,
        _ => Family::Other,
    }
}

pub fn is_shell(path: &str) -> bool {
    family(executable_name(path)) == Family::Shell
}

/// The `-c` string of a shell command line, if it is one.
pub fn shell_command(argv: &[String]) -> Option<&str> {
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
pub fn is_single_command(script: &str) -> bool {
    let (mut single, mut double) = (false, false);
    let b: Vec<char> = script.trim().chars().collect();
    for (i, &c) in b.iter().enumerate() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ if single => {}
            '`' => return false,
            '$' if b.get(i + 1) == Some(&'(') => return false,
            _ if double => {}
            ';' | '|' | '\n' | '(' | ')' => return false,
            '&' if b.get(i + 1) != Some(&'>') && (i == 0 || b[i - 1] != '>') => return false,
            _ => {}
        }
    }
    !b.is_empty()
}

/// Words of a simple shell command, quotes removed (enough to name it, not to run it).
pub fn shell_words(script: &str) -> Vec<String> {
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

/// The tool name of a command line whose program is `exe`.
pub fn tool_name_of(exe: &str, argv: &[String]) -> String {
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
                let words: Vec<String> = words
                    .into_iter()
                    .skip_while(|w| w == "exec" || w.contains('='))
                    .collect();
                if is_single_command(cmd) && !words.is_empty() {
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
                return exe.into();
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
        Family::Script => first_operand(rest, &["-e", "-E", "-f"])
            .filter(|_| !rest.iter().any(|a| a == "-e" || a == "-E"))
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
        assert_eq!(name(&["python3", "-c", "print(1)"]), "python3");
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
    fn a_shell_wrapping_one_command_is_named_by_it() {
        assert_eq!(
            name(&["sh", "-c", "samtools index a.bam > log 2>&1"]),
            "samtools"
        );
        assert_eq!(name(&["bash", "-c", "exec python3 run.py"]), "run.py");
        assert_eq!(name(&["bash", "-c", "a | b"]), "bash");
        assert_eq!(name(&["bash", "-c", "set -e; b"]), "bash");
    }

    #[test]
    fn single_command_detection() {
        assert!(is_single_command("bwa mem ref.fa 'a;b' > out.sam 2>&1"));
        assert!(!is_single_command("a && b"));
        assert!(!is_single_command("a & "));
        assert!(!is_single_command("echo $(date)"));
        assert!(!is_single_command("a | b"));
        assert!(is_single_command("echo '$(not run)'"));
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
