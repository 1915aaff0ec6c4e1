//! The engine's verdict on a task's exit, where it was told to judge exit codes otherwise
//! than "0 succeeds" (cwltool's `successCodes`, `temporaryFailCodes`, `permanentFailCodes`).
use super::TaskInfo;
use crate::tree::{Exit, Proc};

/// Exit codes a task's engine was told to judge otherwise than by 0 alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExitCodes {
    /// Codes it counts as success (grep's 1 for no match).
    pub success: Vec<i64>,
    /// Codes it counts as a failure worth a retry, even 0.
    pub temporary_fail: Vec<i64>,
    /// Codes it counts as a failure for good, even 0.
    pub permanent_fail: Vec<i64>,
}

/// What the engine made of an exit its lists decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success,
    TemporaryFail,
    PermanentFail,
}

impl Verdict {
    /// The engine's word for it (cwltool's `[job NAME] completed WORD`).
    pub fn word(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::TemporaryFail => "temporaryFail",
            Self::PermanentFail => "permanentFail",
        }
    }
}

impl ExitCodes {
    /// The verdict where a listed code decides it, in cwltool's order: success codes
    /// first, then temporary, then permanent failure codes. None: nothing listed decides
    /// (0 succeeds, anything else fails), or the status is unknown.
    pub(crate) fn listed(&self, exit: &Exit) -> Option<Verdict> {
        if !exit.known() {
            return None;
        }
        // cwltool's return code for a process a signal ended is the signal's number, negated.
        let code = exit.signal().map_or(exit.code(), |s| -i64::from(s));
        let lists = [
            (&self.success, Verdict::Success),
            (&self.temporary_fail, Verdict::TemporaryFail),
            (&self.permanent_fail, Verdict::PermanentFail),
        ];
        (lists.into_iter())
            .find(|(codes, _)| codes.contains(&code))
            .map(|(_, v)| v)
    }
}

impl TaskInfo {
    /// Whether the engine counts this exit as its task's success: a listed code decides,
    /// else 0 (or a status not known, as elsewhere).
    pub fn succeeded(&self, exit: &Exit) -> bool {
        match self.codes.listed(exit) {
            Some(v) => v == Verdict::Success,
            None => exit.code() == 0,
        }
    }

    /// Whether the task failed: its engine's verdict on its exit, but never a stop its own
    /// run chose.
    pub fn failed(&self, p: &Proc) -> bool {
        p.exit.as_ref().is_some_and(|e| !self.succeeded(e)) && !p.ended_on_purpose()
    }

    /// The verdict on task process `p`'s exit where a listed code decides it.
    pub fn verdict(&self, p: &Proc) -> Option<Verdict> {
        p.exit.as_ref().and_then(|e| self.codes.listed(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: u32) -> Exit {
        Exit {
            time_ns: 1,
            status: code << 8,
        }
    }

    fn codes(success: &[i64], temporary: &[i64], permanent: &[i64]) -> TaskInfo {
        TaskInfo {
            codes: ExitCodes {
                success: success.to_vec(),
                temporary_fail: temporary.to_vec(),
                permanent_fail: permanent.to_vec(),
            },
            ..Default::default()
        }
    }

    /// cwltool's `job.py`: successCodes, then temporaryFailCodes, then permanentFailCodes,
    /// then 0 succeeds and anything else fails for good.
    #[test]
    fn listed_codes_decide_in_cwltools_order() {
        let t = codes(&[1, 2], &[2, 0, 3], &[3, 4, 0]);
        let v = |c| t.codes.listed(&exited(c));
        assert_eq!(v(1), Some(Verdict::Success));
        assert_eq!(v(2), Some(Verdict::Success));
        assert_eq!(v(0), Some(Verdict::TemporaryFail));
        assert_eq!(v(3), Some(Verdict::TemporaryFail));
        assert_eq!(v(4), Some(Verdict::PermanentFail));
        assert_eq!(v(5), None);
        assert!(t.succeeded(&exited(1)));
        assert!(!t.succeeded(&exited(0)), "0 listed as a failure fails");
        assert!(!t.succeeded(&exited(5)));
        let plain = TaskInfo::default();
        assert!(plain.succeeded(&exited(0)) && !plain.succeeded(&exited(1)));
    }

    /// cwltool sees a process a signal ended as the signal's negated number; an unknown
    /// status is judged by no list.
    #[test]
    fn a_signal_is_its_negated_number_and_an_unknown_status_no_code() {
        let t = codes(&[-15], &[], &[0]);
        let term = Exit {
            time_ns: 1,
            status: 15,
        };
        assert_eq!(t.codes.listed(&term), Some(Verdict::Success));
        let unknown = Exit {
            time_ns: 1,
            status: Exit::UNKNOWN,
        };
        assert_eq!(t.codes.listed(&unknown), None);
        assert!(t.succeeded(&unknown));
    }
}
