//! Secrets out of command lines before anything leaves the agent. On by default.
use regex::Regex;

pub const MASK: &str = "[REDACTED]";

/// Words that mark the value after them as secret.
const SECRET_WORDS: &str = r"(?:password|passwd|pwd|passphrase|token|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|credentials?|private[_-]?key|client[_-]?secret|aws_secret_access_key)";

pub struct Redactor {
    /// `--password=x`, `password=x`, `password:x`, `PASSWORD=x` inside an argument.
    inline: Regex,
    /// An argument that is only the key (`--password`): the next argument is the secret.
    flag: Regex,
    /// `--token abc` inside one string (a shell command): the word after the flag.
    flag_value: Regex,
    /// `scheme://user:password@host`.
    url: Regex,
    /// What each of the four above needs somewhere in its text (a secret word's core, or
    /// `://`): a literal search that rules most arguments out at once.
    hint: Regex,
    extra: Vec<Regex>,
    enabled: bool,
}

/// The replacements, with the kept prefix as group 1.
const MASK_AFTER_1: &str = "${1}[REDACTED]";
const MASK_AFTER_1_AT: &str = "${1}[REDACTED]@";

#[derive(Debug, thiserror::Error)]
#[error("redaction pattern `{pattern}` is not a valid regex: {source}")]
pub struct PatternError {
    pattern: String,
    source: regex::Error,
}

impl Redactor {
    pub fn new(enabled: bool, extra: &[String]) -> Result<Self, PatternError> {
        let extra = extra
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|source| PatternError {
                    pattern: p.clone(),
                    source,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            inline: Regex::new(&format!(
                r"(?i)(\b[\w.-]*{SECRET_WORDS}[\w.-]*\s*[=:]\s*)(\S+)"
            ))
            .expect("static regex"),
            flag: Regex::new(&format!(r"(?i)^-{{1,2}}[\w.-]*{SECRET_WORDS}[\w.-]*$"))
                .expect("static regex"),
            flag_value: Regex::new(&format!(
                r"(?i)(\s-{{1,2}}[\w.-]*{SECRET_WORDS}[\w.-]*\s+)([^\s-]\S*)"
            ))
            .expect("static regex"),
            url: Regex::new(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@")
                .expect("static regex"),
            hint: Regex::new(r"(?i)pass|pwd|token|secret|key|credential|://")
                .expect("static regex"),
            extra,
            enabled,
        })
    }

    pub fn argv(&self, argv: &[String]) -> Vec<String> {
        if !self.enabled {
            return argv.to_vec();
        }
        let mut out = Vec::with_capacity(argv.len());
        let mut next_is_secret = false;
        for a in argv {
            if next_is_secret {
                out.push(MASK.to_string());
                next_is_secret = false;
                continue;
            }
            next_is_secret = self.hint.is_match(a) && self.flag.is_match(a);
            out.push(self.text(a));
        }
        out
    }

    /// Redacts inside one string (an argument, or a whole shell command).
    pub fn text(&self, s: &str) -> String {
        if !self.enabled {
            return s.to_string();
        }
        let mut s = match self.hint.is_match(s) {
            true => {
                let s = self.url.replace_all(s, MASK_AFTER_1_AT);
                let s = self.inline.replace_all(&s, MASK_AFTER_1);
                self.flag_value.replace_all(&s, MASK_AFTER_1).into_owned()
            }
            false => s.to_string(),
        };
        for re in &self.extra {
            s = re.replace_all(&s, MASK).into_owned();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn common_secret_forms_are_masked() {
        let r = Redactor::new(true, &[]).unwrap();
        let out = r.argv(&v(&[
            "tool",
            "--password=hunter2",
            "--api-key",
            "AKIA123",
            "token:abc",
            "DB_PASSWORD=x",
            "--threads",
            "4",
            "https://bob:pw@example.org/data",
            "--private-key",
            "k.pem",
        ]));
        let joined = out.join(" ");
        for secret in ["hunter2", "AKIA123", "abc", "=x", ":pw@", "k.pem"] {
            assert!(!joined.contains(secret), "{secret} leaked: {joined}");
        }
        assert!(joined.contains("--threads 4"), "{joined}");
        assert!(
            joined.contains("https://bob:[REDACTED]@example.org/data"),
            "{joined}"
        );
    }

    /// Every secret word, in any case, gets past the literal pre-check in all three forms.
    #[test]
    fn every_secret_word_is_masked_in_every_form() {
        let r = Redactor::new(true, &[]).unwrap();
        let words = [
            "password",
            "PASSWD",
            "Pwd",
            "passphrase",
            "Token",
            "SECRET",
            "api_key",
            "API-KEY",
            "apikey",
            "access-token",
            "auth_token",
            "credential",
            "Credentials",
            "private_key",
            "client-secret",
            "AWS_SECRET_ACCESS_KEY",
            "db_Password",
        ];
        for w in words {
            let inline = r.text(&format!("{w}=hunter2"));
            let shell = r.text(&format!("tool --{w} hunter2 -x"));
            let argv = r.argv(&v(&["tool", &format!("--{w}"), "hunter2"]));
            for out in [inline, shell, argv.join(" ")] {
                assert!(!out.contains("hunter2"), "{w}: {out}");
            }
        }
        assert_eq!(r.text("/bin/true"), "/bin/true");
        assert_eq!(MASK_AFTER_1, format!("${{1}}{MASK}"));
        assert_eq!(MASK_AFTER_1_AT, format!("${{1}}{MASK}@"));
    }

    #[test]
    fn secrets_inside_shell_strings_are_masked() {
        let r = Redactor::new(true, &[]).unwrap();
        let s = r.text("set -e; curl --token abc123 -H x https://u:p@h/ && x --secret=s3");
        assert!(
            !s.contains("abc123") && !s.contains(":p@") && !s.contains("s3"),
            "{s}"
        );
    }

    #[test]
    fn user_patterns_and_disabling() {
        let r = Redactor::new(true, &["ACC-[0-9]+".into()]).unwrap();
        assert_eq!(r.text("run ACC-991 now"), "run [REDACTED] now");
        let off = Redactor::new(false, &[]).unwrap();
        assert_eq!(off.text("--password=x"), "--password=x");
        assert!(Redactor::new(true, &["(".into()]).is_err());
    }
}
