//! Who ran it and who pays for it: the real user of a process (`user.id`, and `user.name`
//! as the host's user database names it) and its cost centre (`pipetrace.cost.centre`), so
//! every span and cost figure can be grouped by them.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use opentelemetry::KeyValue;
use pipetrace_semconv::attr;

use pipetrace_core::port::SharedHost;
use pipetrace_core::tree::Proc;

/// Users' names looked up once each (NSS may ask a directory server).
pub struct Users {
    host: SharedHost,
    names: Mutex<HashMap<u32, Option<Arc<str>>>>,
}

/// Users remembered at most; past it the memory starts afresh.
const MAX_USERS: usize = 4096;

impl Users {
    pub(crate) fn new(host: SharedHost) -> Self {
        Self {
            host,
            names: Mutex::new(HashMap::new()),
        }
    }

    fn name(&self, uid: u32) -> Option<Arc<str>> {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = names.get(&uid) {
            return n.clone();
        }
        if names.len() >= MAX_USERS {
            names.clear();
        }
        let n: Option<Arc<str>> = self.host.user_name(uid).map(Into::into);
        names.insert(uid, n.clone());
        n
    }
}

/// Where a cost centre comes from, besides a Slurm job's account.
#[derive(Default)]
pub struct Centre {
    /// The container label that names it.
    pub label: String,
    /// The configured one (a resource attribute), for everything else.
    pub configured: Option<String>,
}

impl Centre {
    pub fn of_config(cfg: &pipetrace_config::Config) -> Self {
        Self {
            label: cfg.cost.centre_label.clone(),
            configured: cfg
                .resource_attributes
                .get(&cfg.cost.centre_attribute)
                .filter(|v| !v.is_empty())
                .cloned(),
        }
    }

    /// A process's cost centre: its Slurm job's account, else its container's label, else
    /// the configured one.
    fn of(&self, p: &Proc) -> Option<String> {
        let c = p.container.as_deref();
        let account = (c.and_then(|c| c.slurm.as_ref()))
            .and_then(|s| s.record())
            .and_then(|r| r.account.clone());
        let label = || {
            let labels = &c?.details.labels;
            let (_, v) = labels.iter().find(|(k, _)| **k == self.label)?;
            Some(v.clone())
        };
        account
            .or_else(label)
            .or_else(|| self.configured.clone())
            .filter(|v| !v.is_empty())
    }
}

/// The user and cost centre attributes of process `p` (a task's or run's first process).
pub(crate) fn who_attrs(p: &Proc, users: Option<&Users>, centre: &Centre, out: &mut Vec<KeyValue>) {
    if let Some(uid) = p.uid {
        out.push(KeyValue::new(attr::USER_ID, uid.to_string()));
        if let Some(name) = users.and_then(|u| u.name(uid)) {
            out.push(KeyValue::new(attr::USER_NAME, name.to_string()));
        }
    }
    if let Some(c) = centre.of(p) {
        out.push(KeyValue::new(attr::COST_CENTRE, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_core::event::ProcKey;
    use pipetrace_core::port::fake::FakeHost;

    fn proc_of(uid: Option<u32>) -> Proc {
        let key = ProcKey {
            pid: 7,
            start_ticks: 1,
        };
        let mut p = Proc::new(key, None, 1, 0, "x".into());
        p.uid = uid;
        p
    }

    fn texts(out: &[KeyValue]) -> Vec<(String, String)> {
        out.iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect()
    }

    #[test]
    fn the_user_is_named_by_the_hosts_database_and_looked_up_once() {
        let fake = FakeHost::default();
        fake.add_user(1000, "alice");
        let users = Users::new(Arc::new(fake.clone()));
        let centre = Centre {
            configured: Some("genomics".into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        who_attrs(&proc_of(Some(1000)), Some(&users), &centre, &mut out);
        let want = [
            (attr::USER_ID, "1000"),
            (attr::USER_NAME, "alice"),
            (attr::COST_CENTRE, "genomics"),
        ];
        let want: Vec<(String, String)> = (want.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(texts(&out), want);
        fake.add_user(1000, "renamed");
        let mut again = Vec::new();
        who_attrs(&proc_of(Some(1000)), Some(&users), &centre, &mut again);
        assert_eq!(texts(&again), want, "remembered");
        let mut unknown = Vec::new();
        who_attrs(
            &proc_of(Some(4242)),
            Some(&users),
            &Centre::default(),
            &mut unknown,
        );
        assert_eq!(
            texts(&unknown),
            [(attr::USER_ID.to_string(), "4242".to_string())],
            "an id no database names, and no cost centre"
        );
        let mut none = Vec::new();
        who_attrs(&proc_of(None), Some(&users), &Centre::default(), &mut none);
        assert!(none.is_empty());
    }
}
