//! pipetrace's core, bottom layers: the kernel's events decoded, the process tree, the
//! placement of processes in containers and jobs, and their resource figures. It sees the
//! machine only through the [`port::Host`] it is handed: this crate depends on no crate that
//! reads /proc, loads eBPF, opens sockets or databases, so its dependency list is the rule.
pub mod accounting;
pub mod attribution;
pub mod containers;
pub mod diagnosis;
#[cfg(test)]
mod disk_host;
pub mod event;
pub mod facts;
pub mod files;
pub mod judgement;
pub mod machine;
pub mod port;
pub mod redact;
pub mod sizing;
pub mod tree;
