//! Empty on purpose: the programs are the `pipetrace-probes` binary. This library target only
//! lets collector/ declare a build-dependency, so cargo rebuilds it when the probes change.
#![no_std]
