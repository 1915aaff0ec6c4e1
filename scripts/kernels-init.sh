#!/bin/busybox sh
# /init of the guest that scripts/test-kernels.sh boots: the file systems pipetrace reads,
# `pipetrace doctor`, a traced command, then the results as base64 on the second serial
# port (no modules needed, unlike 9p or a virtio disk) and power off.
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
hostname guest
cut -d' ' -f1 /proc/uptime >/out/uptime-init
uname -r >/out/kernel
cd /out

# Guest uptimes after each step (uptime-*): what the boot, doctor and the run each took.
pipetrace doctor >doctor.txt 2>&1
echo $? >doctor.rc
cut -d' ' -f1 /proc/uptime >/out/uptime-doctor

# Each process a tool span: two workloads reaped by rusage-of (wait4's figures to compare
# with), a shell that exits 3, then the command's own exit 0.
pipetrace run -o /out/t.otlp.jsonl -- sh -c '
  rusage-of /out/ru-alloc.json -- workload alloc 64
  rusage-of /out/ru-burn.json -- workload burn 300
  sh -c "exit 3"
  exit 0' >run.log 2>&1
echo $? >run.rc
cut -d' ' -f1 /proc/uptime >/out/uptime-run

stty -F /dev/ttyS1 raw -echo
{
  tar cf - -C /out . | gzip | base64
  echo PIPETRACE-GUEST-END
} >/dev/ttyS1
sleep 1
poweroff -f
