//! The packaged /etc/pipetrace/config.yaml: every key commented out at its default, under its
//! comment, so that the file as installed changes nothing and shows everything there is to
//! change. Uncommenting every line gives back exactly `pipetrace config print-default`.

/// Where the Debian package and the release tarball put the file, and the systemd unit reads it.
pub const PATH: &str = "/etc/pipetrace/config.yaml";

/// What the file says before the keys, each line a comment.
const HEADER: &str = "\
# pipetrace's configuration for the agent (pipetrace.service) and for `pipetrace --config`.
# Every key below is commented out at its default (`#key: value`): remove that `#` (and the
# one of each section above it) to change it. The environment (PIPETRACE_*, OTEL_*) and
# flags override this file. Check it with: pipetrace config validate /etc/pipetrace/config.yaml
# Reference: docs/configuration.md, or `pipetrace config print-default`.
";

/// The file's text: [`HEADER`], then the defaults as `print-default` writes them, each key's
/// description as it is (`# ...`) and each key's line commented out (`#key: value`, at its
/// indentation), as sshd_config does: removing that `#` turns a setting on.
pub fn commented_out() -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for line in crate::load::default_yaml().lines() {
        let body = line.trim_start();
        if !body.is_empty() && !body.starts_with('#') {
            out.push_str(&line[..line.len() - body.len()]);
            out.push('#');
            out.push_str(body);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Config, Flags,
        testing::{file, load_with},
    };

    #[test]
    fn as_installed_it_is_the_defaults() {
        let f = file(&commented_out());
        let c = load_with(Some(f.path()), &[], &Flags::default()).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn uncommented_it_is_print_default() {
        let text = commented_out();
        let body = &text[HEADER.len() + 1..];
        // A setting's `#` is followed by its key, a description's by a space.
        let uncommented: String = body
            .lines()
            .map(|l| {
                let text = l.trim_start();
                match text.strip_prefix('#') {
                    Some(rest) if !rest.starts_with(' ') => {
                        format!("{}{rest}\n", &l[..l.len() - text.len()])
                    }
                    _ => format!("{l}\n"),
                }
            })
            .collect();
        assert_eq!(uncommented, crate::load::default_yaml());
    }

    #[test]
    fn every_line_is_a_comment_or_blank() {
        for line in commented_out().lines() {
            let text = line.trim_start();
            assert!(text.is_empty() || text.starts_with('#'), "{line:?}");
        }
    }
}
