//! What a batch script asks Slurm for in its `#SBATCH` lines: CPUs per task and memory, in
//! Slurm's units (`--mem` counts MiB unless it names K, M, G or T, all powers of 1024).
//! Nextflow's Slurm executor writes them atop a task's `.command.run` (`-c 2`, `--mem 300M`).

/// The CPUs and memory (bytes) a script's directives ask for, where they say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asks {
    pub cpus: Option<u32>,
    pub memory_bytes: Option<u64>,
    /// `--time`, seconds.
    pub time_s: Option<u64>,
}

/// The asks of the `#SBATCH` lines at a script's top (Slurm reads none after its first
/// command); `--mem-per-cpu` counts per CPU asked.
pub(crate) fn asks<'a>(lines: impl Iterator<Item = &'a str>) -> Asks {
    let mut out = Asks::default();
    let mut per_cpu = None;
    for line in lines.map(str::trim_start) {
        if !line.is_empty() && !line.starts_with('#') {
            break;
        }
        let Some(d) = line.strip_prefix("#SBATCH") else {
            continue;
        };
        let mut words = d.split_whitespace();
        while let Some(w) = words.next() {
            let (flag, value) = match w.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None if w.starts_with("-c") && w.len() > 2 => ("-c", Some(&w[2..])),
                None => (w, None),
            };
            let value = || value.or_else(|| words.clone().next());
            match flag {
                "-c" | "--cpus-per-task" => out.cpus = value().and_then(|v| v.parse().ok()),
                "--mem" => out.memory_bytes = value().and_then(memory),
                "--mem-per-cpu" => per_cpu = value().and_then(memory),
                "-t" | "--time" => out.time_s = value().and_then(time),
                _ => {}
            }
        }
    }
    if out.memory_bytes.is_none() {
        out.memory_bytes = per_cpu.map(|m| m * u64::from(out.cpus.unwrap_or(1)));
    }
    out
}

/// Slurm's time limit in seconds: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M` or `D-H:M:S`
/// (`UNLIMITED` and `0` set none).
fn time(v: &str) -> Option<u64> {
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, v),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let s = match (v.contains('-'), parts.as_slice()) {
        (false, [m]) => m * 60,
        (false, [m, s]) => m * 60 + s,
        (_, [h, m, s]) => h * 3600 + m * 60 + s,
        (true, [h]) => h * 3600,
        (true, [h, m]) => h * 3600 + m * 60,
        _ => return None,
    };
    Some(days * 86_400 + s).filter(|s| *s > 0)
}

/// Slurm's memory size: a number of MiB, or with a K, M, G or T suffix.
fn memory(v: &str) -> Option<u64> {
    let v = v.trim();
    let (n, shift) = match v.char_indices().last()? {
        (i, 'K' | 'k') => (&v[..i], 10),
        (i, 'M' | 'm') => (&v[..i], 20),
        (i, 'G' | 'g') => (&v[..i], 30),
        (i, 'T' | 't') => (&v[..i], 40),
        _ => (v, 20),
    };
    // `--mem 0` asks for all of a node's memory: no figure to judge against.
    n.parse::<u64>().ok().filter(|n| *n > 0).map(|n| n << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nextflows_directives_give_its_cpus_and_memory_in_mib() {
        let head = "#!/bin/bash\n#SBATCH -J nf-ALIGN_(1)\n#SBATCH -o /w/ab/cd/.command.log\n\
                    #SBATCH --no-requeue\n#SBATCH --signal B:USR2@30\n#SBATCH -c 2\n\
                    #SBATCH --mem 300M\nNXF_CHDIR=/w/ab/cd\n### ---\n### name: 'ALIGN (1)'\n";
        let a = asks(head.lines());
        assert_eq!(a.cpus, Some(2));
        assert_eq!(a.memory_bytes, Some(300 << 20));
    }

    #[test]
    fn every_spelling_and_unit_slurm_takes_is_read() {
        let a = |s: &str| asks(s.lines());
        assert_eq!(
            a("#SBATCH --mem=4G --cpus-per-task=8").memory_bytes,
            Some(4 << 30)
        );
        assert_eq!(a("#SBATCH --mem=4G --cpus-per-task=8").cpus, Some(8));
        assert_eq!(a("#SBATCH --mem=2000").memory_bytes, Some(2000 << 20));
        assert_eq!(a("#SBATCH --mem 512K").memory_bytes, Some(512 << 10));
        assert_eq!(a("#SBATCH --mem=1T").memory_bytes, Some(1 << 40));
        assert_eq!(a("#SBATCH -c4").cpus, Some(4));
        assert_eq!(a("#SBATCH --cpus-per-task 3").cpus, Some(3));
        let per_cpu = a("#SBATCH -c 4\n#SBATCH --mem-per-cpu=1G");
        assert_eq!(per_cpu.memory_bytes, Some(4 << 30));
        assert_eq!(a("#SBATCH --mem=0").memory_bytes, None, "all of a node's");
        assert_eq!(a("#SBATCH --mem=lots").memory_bytes, None);
        assert_eq!(a("# SBATCH -c 4\necho #SBATCH -c 2").cpus, None);
        assert_eq!(
            a("#!/bin/sh\ncd /w\n#SBATCH -c 2").cpus,
            None,
            "after a command"
        );
    }

    #[test]
    fn every_spelling_of_a_time_limit_slurm_takes_is_read() {
        let t = |l: &str| asks(std::iter::once(l)).time_s;
        assert_eq!(t("#SBATCH -t 30"), Some(1800), "minutes");
        assert_eq!(t("#SBATCH --time=30:15"), Some(1815), "minutes:seconds");
        assert_eq!(t("#SBATCH --time 2:00:00"), Some(7200));
        assert_eq!(t("#SBATCH -t 1-12"), Some(86_400 + 12 * 3600), "days-hours");
        assert_eq!(t("#SBATCH -t 1-0:30"), Some(86_400 + 1800));
        assert_eq!(t("#SBATCH -t 2-01:00:05"), Some(2 * 86_400 + 3605));
        assert_eq!(t("#SBATCH -t UNLIMITED"), None);
        assert_eq!(t("#SBATCH -t 0"), None);
    }
}
