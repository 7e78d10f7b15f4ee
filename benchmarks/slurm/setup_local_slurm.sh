#!/bin/bash
# A one-node Slurm (Debian's slurm-wlm, 22.05) on localhost with 8 fake GPUs, for comparing
# what sbatch/srun give a job with what railyard gives it. Run as root on a throw-away machine:
#   apt-get install -y slurm-wlm && bash benchmarks/slurm/setup_local_slurm.sh
# It writes /etc/slurm/{slurm,gres,cgroup}.conf, creates /dev/fake_gpu0..7 (inert character devices), and starts munged, slurmctld and slurmd. Nothing listens
# beyond 127.0.0.1 except Slurm's own ports on this host.
set -euo pipefail
NODE=$(hostname -s)
CPUS=16  # declared, not counted: enough for 8 tasks of the comparison on a small machine
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown slurm: /var/spool/slurmctld /var/log/slurm
# Slurm's gres/gpu wants character devices (plain files are refused); major 195 is NVIDIA's,
# so with no driver loaded they are inert. Slurm sets CUDA_VISIBLE_DEVICES from their indices.
for i in 0 1 2 3 4 5 6 7; do [ -c /dev/fake_gpu$i ] || { rm -f /dev/fake_gpu$i; mknod -m 660 /dev/fake_gpu$i c 195 $i; }; done
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=railyard-compare
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
MaxArraySize=1001
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:h100:8 State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > /etc/slurm/gres.conf <<CONF
NodeName=$NODE Name=gpu Type=h100 File=/dev/fake_gpu[0-7]
CONF
# proctrack/linuxproc and task/none: no cgroups needed (containers often lack cgroup v2)
cat > /etc/slurm/cgroup.conf <<CONF
CgroupPlugin=autodetect
IgnoreSystemd=yes
CONF
chown munge: /run/munge
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc' && break; sleep 1; done
scontrol update nodename="$NODE" state=resume 2>/dev/null || true
sinfo
