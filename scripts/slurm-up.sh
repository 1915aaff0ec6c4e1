#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for the batch-scheduler tests: munge, then
# slurmctld and slurmd with this host as controller and only node, proctrack/cgroup and
# task/cgroup on cgroup v1. Idempotent: what runs already is left alone. Needs root and
# Debian's slurm-wlm and munge (scripts/setup.sh installs them).
set -euo pipefail
say() { printf 'slurm-up: %s\n' "$*" >&2; }
host=$(hostname -s)
# One at a time: two tests that bring it up at once both start munged, and one fails
# ("Failed to lock /run/munge/munge.socket.2.lock"). The daemons started below must not
# inherit the lock's descriptor (9>&-): one that holds it would block every later caller.
exec 9>/run/pipetrace-slurm-up.lock
flock -w 300 9 || { say "another slurm-up.sh held /run/pipetrace-slurm-up.lock for 300 s"; exit 1; }

if ! pgrep -x munged >/dev/null; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  runuser -u munge -- /usr/sbin/munged 9>&-
  say "munged started"
fi

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
conf=/etc/slurm/slurm.conf
if [[ ! -f $conf ]] || ! grep -q "^SlurmctldHost=$host\$" "$conf"; then
  cat >"$conf" <<CONF
ClusterName=pipetrace
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
NodeName=$host CPUs=$(nproc) RealMemory=$(($(awk '/^MemTotal/ {print $2}' /proc/meminfo) / 2048)) State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  printf 'CgroupPlugin=cgroup/v1\n' >/etc/slurm/cgroup.conf
  say "wrote $conf"
fi
pgrep -x slurmctld >/dev/null || { slurmctld 9>&- && say "slurmctld started"; }
pgrep -x slurmd >/dev/null || { slurmd 9>&- && say "slurmd started"; }
for _ in $(seq 50); do
  sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && exit 0
  sleep 0.2
done
say "the node did not come up: see /var/log/slurm/"
exit 1
