#!/bin/bash
# A one-node Slurm 22.05 (Debian 12's slurm-wlm and slurmdbd) on localhost with 8 fake GPUs and
# accounting in MariaDB, for comparing what a user of sbatch/srun/squeue/sacct meets with what
# railyard gives them (benchmarks/slurm/compare_*.py). Run as root on a throw-away machine:
#
#   apt-get install -y slurm-wlm slurmdbd mariadb-server
#   bash benchmarks/slurm/setup_local_slurm.sh          # again at any time: it is idempotent
#   bash benchmarks/slurm/setup_local_slurm.sh --stop   # stops slurmd, slurmctld, slurmdbd
#
# What it does, each step skipped or redone harmlessly when already done:
# - /dev/fake_gpu0..7: character devices with NVIDIA's major (195). Slurm's gres/gpu refuses
#   plain files; with no driver loaded the devices are inert. CUDA_VISIBLE_DEVICES comes from
#   their indices, as on a real GPU node.
# - /etc/slurm/{slurm,gres,cgroup,slurmdbd}.conf, rewritten each run from this script.
#   Node `$(hostname -s)`: 16 CPUs (declared, not counted), the memory less 1 GiB, gpu:h100:8.
#   Partitions `gpu` (the default) and `debug`, both on that node (as in issue 57).
#   Multifactor priority (sprio, sshare answer), backfill, PrologFlags=Contain (the .extern step
#   sacct shows), proctrack/linuxproc and task/none (no cgroups needed in a container).
# - MariaDB at 127.0.0.1:3306 as root with an empty password (MYSQL_* below to change): the
#   database slurm_acct_db is made by slurmdbd itself on its first start.
# - munged, slurmdbd, slurmctld, slurmd started unless running; the cluster, account `research`
#   and user root (and SUDO_USER, if any) registered with sacctmgr so jobs carry an account
#   (SLURM_JOB_ACCOUNT) and QOS `normal`.
# Nothing listens beyond this host but Slurm's own ports (6817-6819).
set -euo pipefail
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${MYSQL_PORT:-3306}
MYSQL_USER=${MYSQL_USER:-root}
MYSQL_PASS=${MYSQL_PASS:-}
CLUSTER=railyard-compare
NODE=$(hostname -s)

stop() {
    for daemon in slurmd slurmctld slurmdbd; do
        pid=$(pgrep -x "$daemon" || true)
        [ -n "$pid" ] && kill "$pid" && echo "stopped $daemon ($pid)"
    done
    return 0
}
if [ "${1:-}" = "--stop" ]; then stop; exit 0; fi

CPUS=16
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown slurm: /var/spool/slurmctld /var/log/slurm
for i in 0 1 2 3 4 5 6 7; do
    [ -c /dev/fake_gpu$i ] || { rm -f /dev/fake_gpu$i; mknod -m 660 /dev/fake_gpu$i c 195 $i; }
done

cat > /etc/slurm/slurm.conf <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
PrologFlags=Contain
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
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=associations
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_interval=5
MaxArraySize=1001
# Without it a job holds the node's whole memory (CR_Core_Memory) and jobs never share it.
DefMemPerCPU=1024
KillWait=5
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:h100:8 State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName=debug Nodes=$NODE MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > /etc/slurm/gres.conf <<CONF
NodeName=$NODE Name=gpu Type=h100 File=/dev/fake_gpu[0-7]
CONF
cat > /etc/slurm/cgroup.conf <<CONF
CgroupPlugin=autodetect
IgnoreSystemd=yes
CONF
cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=$MYSQL_HOST
StoragePort=$MYSQL_PORT
StorageUser=$MYSQL_USER
$([ -n "$MYSQL_PASS" ] && echo "StoragePass=$MYSQL_PASS")
StorageLoc=slurm_acct_db
CONF
chown slurm: /etc/slurm/slurmdbd.conf
chmod 600 /etc/slurm/slurmdbd.conf

chown munge: /run/munge
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x mariadbd >/dev/null || pgrep -x mysqld >/dev/null || {
    echo "MariaDB is not running at $MYSQL_HOST:$MYSQL_PORT (hint: service mariadb start)" >&2
    exit 2
}
pgrep -x slurmdbd >/dev/null || slurmdbd
for _ in $(seq 30); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true
sacctmgr -i -Q add account research Cluster="$CLUSTER" Description=compare Organization=railyard \
    >/dev/null 2>&1 || true
for user in root ${SUDO_USER:-}; do
    sacctmgr -i -Q add user "$user" Account=research DefaultAccount=research >/dev/null 2>&1 || true
done
# slurm.conf may have changed since the daemons started: reconfigure those running.
if pgrep -x slurmctld >/dev/null; then scontrol reconfigure; else slurmctld; fi
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc' && break; sleep 1; done
scontrol update nodename="$NODE" state=resume 2>/dev/null || true
sinfo
sacctmgr -n -P list assoc format=cluster,account,user
