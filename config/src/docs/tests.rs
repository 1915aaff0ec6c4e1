use super::*;

/// Every key path of the defaults (sections and leaves).
fn paths(v: &Value, path: &str, out: &mut Vec<String>) {
    if let Value::Mapping(m) = v {
        for (k, v) in m {
            let full = match path {
                "" => k.as_str().unwrap().to_string(),
                p => format!("{p}.{}", k.as_str().unwrap()),
            };
            out.push(full.clone());
            paths(v, &full, out);
        }
    }
}

#[test]
fn every_key_has_its_comment_and_every_comment_its_key() {
    let v = serde_yaml::to_value(crate::Config::default()).unwrap();
    let mut all = Vec::new();
    paths(&v, "", &mut all);
    for p in &all {
        assert!(
            comment(p).is_some(),
            "`{p}` has no comment in config/src/docs.rs"
        );
    }
    for (k, _) in KEYS {
        assert!(
            all.iter().any(|p| p == k),
            "a comment for `{k}`, which is no key"
        );
    }
}

#[test]
fn the_commented_defaults_read_back_as_the_defaults() {
    let v = serde_yaml::to_value(crate::Config::default()).unwrap();
    let text = commented(&v);
    assert!(
        text.contains("# Kernel ring buffer size in bytes"),
        "{text}"
    );
    let back: crate::Config = serde_yaml::from_str(&text).unwrap();
    assert_eq!(back, crate::Config::default());
}
