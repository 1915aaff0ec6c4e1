//! Run and task rules from the config: match a process, name it from a template.
use regex::Regex;

use super::naming::{executable_name, program_name, tool_name_of};
use crate::tree::Image;

pub struct CompiledRule {
    executable: Option<String>,
    argv: Option<Regex>,
    cwd: Option<Regex>,
    template: String,
}

impl CompiledRule {
    /// Regexes were checked when the config was loaded; a bad one here is a bug.
    pub(crate) fn new(rule: &pipetrace_config::Rule) -> Result<Self, regex::Error> {
        let re = |s: &Option<String>| s.as_deref().map(Regex::new).transpose();
        Ok(Self {
            executable: rule.matches.executable.clone(),
            argv: re(&rule.matches.argv)?,
            cwd: re(&rule.matches.cwd)?,
            template: rule.name.clone(),
        })
    }

    pub(crate) fn matches(&self, image: &Image) -> bool {
        let tool = tool_name_of(program_name(&image.path, &image.argv), &image.argv);
        let exe = executable_name(&image.path);
        let cwd = image
            .cwd
            .as_ref()
            .map(|c| c.display().to_string())
            .unwrap_or_default();
        self.executable
            .as_ref()
            .is_none_or(|e| e == &tool || e == exe)
            && self
                .argv
                .as_ref()
                .is_none_or(|r| r.is_match(&image.argv.join(" ")))
            && self.cwd.as_ref().is_none_or(|r| r.is_match(&cwd))
    }

    pub(crate) fn name(&self, image: &Image) -> String {
        render(&self.template, image)
    }
}

pub(crate) fn compile(rules: &[pipetrace_config::Rule]) -> Result<Vec<CompiledRule>, regex::Error> {
    rules.iter().map(CompiledRule::new).collect()
}

/// `{tool}`, `{executable}`, `{argv0}`..`{argv9}`, `{cwd}`, `{cwd_name}`.
pub(crate) fn render(template: &str, image: &Image) -> String {
    let cwd = image
        .cwd
        .as_ref()
        .map(|c| c.display().to_string())
        .unwrap_or_default();
    let mut out = template
        .replace(
            "{tool}",
            &tool_name_of(program_name(&image.path, &image.argv), &image.argv),
        )
        .replace("{executable}", executable_name(&image.path))
        .replace("{cwd_name}", executable_name(&cwd))
        .replace("{cwd}", &cwd);
    for i in 0..10 {
        let key = format!("{{argv{i}}}");
        if out.contains(&key) {
            out = out.replace(&key, image.argv.get(i).map(String::as_str).unwrap_or(""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_config::{Match, Rule};

    #[test]
    fn rule_matches_and_names() {
        let rule = Rule {
            matches: Match {
                executable: Some("step.py".into()),
                argv: Some("--sample".into()),
                cwd: Some("^/data/".into()),
            },
            name: "{tool}:{argv3} in {cwd_name}".into(),
        };
        let r = CompiledRule::new(&rule).unwrap();
        let img = Image {
            path: "/usr/bin/python3".into(),
            argv: ["python3", "step.py", "--sample", "S1"]
                .map(String::from)
                .to_vec(),
            cwd: Some("/data/proj".into()),
            ..Default::default()
        };
        assert!(r.matches(&img));
        assert_eq!(r.name(&img), "step.py:S1 in proj");
        let elsewhere = Image {
            cwd: Some("/home/x".into()),
            ..img
        };
        assert!(!r.matches(&elsewhere));
    }
}
