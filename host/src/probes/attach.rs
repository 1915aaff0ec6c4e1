//! Attaching programs, keeping their links, and detaching them all at once.
use aya::{
    Btf, Ebpf,
    programs::{BtfTracePoint, TracePoint},
};

use super::ProbeError;

/// The attached programs' links: dropping one detaches its program.
#[derive(Default)]
pub struct Links(Vec<Box<dyn Send>>);

impl Links {
    /// A classic tracepoint (`category:name`).
    pub(crate) fn tracepoint(
        &mut self,
        ebpf: &mut Ebpf,
        category: &str,
        name: &'static str,
    ) -> Result<(), ProbeError> {
        let err = |e: aya::programs::ProgramError| ProbeError::Attach {
            hook: name,
            reason: e.to_string(),
        };
        let tp: &mut TracePoint = prog(ebpf, name)?;
        tp.load().map_err(err)?;
        let id = tp.attach(category, name).map_err(err)?;
        self.0.push(Box::new(tp.take_link(id).map_err(err)?));
        Ok(())
    }

    /// A BTF-typed raw tracepoint (`tp_btf/name`), by the program of the same name.
    pub(crate) fn btf_tracepoint(
        &mut self,
        ebpf: &mut Ebpf,
        btf: &Btf,
        name: &'static str,
    ) -> Result<(), ProbeError> {
        self.btf_program(ebpf, btf, name, name)
    }

    /// Program `program` on the BTF-typed raw tracepoint `tracepoint`.
    pub(crate) fn btf_program(
        &mut self,
        ebpf: &mut Ebpf,
        btf: &Btf,
        program: &'static str,
        tracepoint: &str,
    ) -> Result<(), ProbeError> {
        let err = |e: aya::programs::ProgramError| ProbeError::Attach {
            hook: program,
            reason: e.to_string(),
        };
        let tp: &mut BtfTracePoint = prog(ebpf, program)?;
        if tp.fd().is_err() {
            tp.load(tracepoint, btf).map_err(err)?;
        }
        let id = tp.attach().map_err(err)?;
        self.0.push(Box::new(tp.take_link(id).map_err(err)?));
        Ok(())
    }
}

/// Loads the BTF tracepoint programs `wanted` (program, tracepoint) at once, one thread
/// each: the kernel verifies each in its caller's context, so they share the CPUs. A
/// program that fails here is loaded again when it is attached, which reports why.
pub(crate) fn load_all(ebpf: &mut Ebpf, btf: &Btf, wanted: &[(&'static str, &'static str)]) {
    std::thread::scope(|s| {
        for (name, program) in ebpf.programs_mut() {
            let Some(&(_, tracepoint)) = wanted.iter().find(|(p, _)| *p == name) else {
                continue;
            };
            let Ok(tp) = <&mut BtfTracePoint>::try_from(program) else {
                continue;
            };
            let _ = std::thread::Builder::new().spawn_scoped(s, move || tp.load(tracepoint, btf));
        }
    });
}

impl Drop for Links {
    /// Detaches every program at once. Detaching a classic tracepoint waits for the
    /// kernel's RCU grace periods (tens of ms each): one by one, `pipetrace run` spent
    /// 0.4 s on it at every end; concurrent waits share the same grace periods.
    fn drop(&mut self) {
        std::thread::scope(|s| {
            for link in self.0.drain(..) {
                // Without a thread, this one detaches here, in turn.
                let _ = std::thread::Builder::new().spawn_scoped(s, move || drop(link));
            }
        });
    }
}

pub(crate) fn prog<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    ebpf.program_mut(name)
        .ok_or(ProbeError::Missing(name))?
        .try_into()
        .map_err(|_| ProbeError::Missing(name))
}
