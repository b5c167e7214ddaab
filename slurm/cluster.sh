#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, to try `snakemake --profile slurm` on a
# workstation and to test it in CI (`make test-slurm`): Debian's SLURM 22.05 with accounting
# (slurmdbd on a private MariaDB), started as plain background processes (no systemd needed).
#
#   sudo slurm/cluster.sh start            install what is missing, start what is not running
#   sudo slurm/cluster.sh stop [DAEMON..]  stop the daemons this script started (all, or those named)
#   slurm/cluster.sh status                which of its daemons run; the node as SLURM sees it
#
# DAEMON is one of munged mariadbd slurmdbd slurmctld slurmd. Every daemon runs from
# $CPTLAB_SLURM_ROOT (default /var/lib/cptlab-slurm): its own munge key and socket, database,
# spool, logs and pid files, so that it never meets a munge or MariaDB the machine already runs,
# and `stop` signals only the processes whose pid files it wrote. The configuration goes where
# SLURM's commands look for it, /etc/slurm/, and is written only where no other configuration
# lives there (each file carries a marker line). Its addresses are 127.0.0.1 and localhost: traffic
# stays on loopback (the SLURM daemons still listen on all interfaces, ports 6817-6819, behind
# munge authentication; MariaDB has no network at all).
#
# The node is this machine, in two partitions: `cpu` (the default, where jobs run) may use only
# its real CPUs; `gpu` sees it in the paper config's shape (8 stand-in H100s, 64 CPUs, 500 GB),
# so that the paper config's GPU jobs can be checked with `sbatch --test-only`. The GPUs are the
# node's, so a job in `cpu` may ask for them too: it runs on the real CPUs with the environment
# of a GPU job. Jobs may charge account `cptlab` (ACCOUNT), which `start` creates for root and
# the sudo user.
set -euo pipefail

ROOT=${CPTLAB_SLURM_ROOT:-/var/lib/cptlab-slurm}
ETC=/etc/slurm
MARKER="# written by cptlab slurm/cluster.sh"
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)  # start order; stop goes backwards
CLUSTER=cptlab
# The account jobs charge: the executor plugin guesses one (and warns) for a job without
# `slurm_account`, and validates a given one against the users' associations.
ACCOUNT=cptlab
WAIT_SECONDS=${CPTLAB_SLURM_WAIT:-60}

say() { echo "cluster.sh: $*"; }
die() {
    echo "cluster.sh: error: $*" >&2
    exit 1
}

# munged and mariadbd drop root for their own users and write their pid files as those users,
# in their own folders; the SLURM daemons run as root.
pidfile() {
    case $1 in
    munged) echo "$ROOT/munge/munged.pid" ;;
    mariadbd) echo "$ROOT/mariadb-run/mariadbd.pid" ;;
    *) echo "$ROOT/run/$1.pid" ;;
    esac
}

# The pid in DAEMON's pid file when that process is alive and is that daemon (a pid file left
# by a crash may name a pid that another program has since taken).
running_pid() {
    local file pid
    file=$(pidfile "$1")
    [[ -s $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm") == "$1" ]] || return 1
    echo "$pid"
}

# Wait up to WAIT_SECONDS for a command to succeed; else fail naming the daemon and its log.
wait_for() {
    local daemon=$1
    shift
    local deadline=$((SECONDS + WAIT_SECONDS))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            die "$daemon did not come up within ${WAIT_SECONDS} s; its log: $ROOT/log/$daemon.log"
        fi
        sleep 0.5
    done
}

install_packages() {
    command -v apt-get >/dev/null ||
        die "this script installs Debian's packages (${PACKAGES[*]}) with apt-get, which is missing"
    local missing=()
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    [[ $EUID -eq 0 ]] || die "installing ${missing[*]} needs root (sudo $0 start)"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine may have no package lists yet.
    apt-get install -y -q --no-install-recommends "${missing[@]}" >"$ROOT/log/apt.log" 2>&1 || {
        apt-get update -q >>"$ROOT/log/apt.log" 2>&1 &&
            apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$ROOT/log/apt.log" 2>&1
    } || die "apt-get install ${missing[*]} failed; see $ROOT/log/apt.log"
}

# Write FILE from stdin unless a file without the marker is there (someone else's SLURM);
# CHANGED lists the files whose content changed.
CHANGED=()
write_config() {
    local file=$1 mode=$2 content
    content=$(cat)
    if [[ -e $file ]] && ! grep -qF "$MARKER" "$file"; then
        die "$file exists and was not written by this script; not touching it"
    fi
    if [[ ! -e $file ]] || [[ $(cat "$file") != "$content" ]]; then
        printf '%s\n' "$content" >"$file"
        CHANGED+=("$file")
    fi
    chmod "$mode" "$file"
}

write_configs() {
    local host cpus
    host=$(hostname -s)
    # This machine's CPUs as slurmd sees them: what jobs of partition `cpu` may use.
    cpus=$(slurmd -C | sed -n 's/^NodeName=.* CPUs=\([0-9]*\) .*/\1/p')
    [[ -n $cpus ]] || die "slurmd -C printed no CPU count: $(slurmd -C)"
    mkdir -p "$ETC"
    write_config "$ETC/slurm.conf" 644 <<EOF
$MARKER
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
# A private test cluster: the daemons run as root, so the folder under $ROOT needs no other user.
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$ROOT/munge/munge.socket.2
StateSaveLocation=$ROOT/spool/slurmctld
SlurmdSpoolDir=$ROOT/spool/slurmd
SlurmctldPidFile=$(pidfile slurmctld)
SlurmdPidFile=$(pidfile slurmd)
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
# cgroups are partial in containers: track processes by their parents, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
# No MPI plugin: Debian builds PMIx support, but the library is not installed.
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that asks for no memory is given the whole node.
DefMemPerCPU=1000
# A finished job stays visible to squeue (the profile's status command) for 5 minutes, above
# the executor plugin's longest wait between status checks (180 s).
MinJobAge=300
# A cancelled or timed-out job is killed 5 s after its SIGTERM (SLURM's default: 30 s).
KillWait=5
ReturnToService=2
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
# With MUNGE, the "password" to slurmdbd names the munge socket its clients use.
AccountingStoragePass=$ROOT/munge/munge.socket.2
# sacct shows each job's comment (the executor plugin writes the rule and wildcards there) and
# its GPUs.
AccountingStoreFlags=job_comment
AccountingStorageTRES=gres/gpu
# One node, this machine, in two partitions. Partition cpu (the default, where jobs run) may use
# only the machine's own CPUs. Partition gpu sees the node in the paper config's shape, 8 GPUs,
# 64 CPUs and 500 GB, so that its requests pass sbatch --test-only; config_overrides keeps
# slurmd from reporting the real, smaller machine (which would mark the node invalid).
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxCPUsPerNode=$cpus MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
    # Stand-in GPUs: no hardware, but the scheduler allocates them and a job gets the variables
    # a GPU node sets (SLURM_JOB_GPUS, SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES). SLURM 22.05's
    # gpu plugin wants a character device per GPU: without one (Count=8) slurmd reports none and
    # the node goes INVAL; with Flags=CountOnly the plugin is not loaded and no job gets those
    # variables. So each GPU's device file is a link to /dev/null, which nothing here opens.
    mkdir -p "$ROOT/gpu"
    for gpu in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$ROOT/gpu/gpu$gpu"; done
    write_config "$ETC/gres.conf" 644 <<EOF
$MARKER
NodeName=$host Name=gpu Type=h100 File=$ROOT/gpu/gpu[0-7]
EOF
    write_config "$ETC/slurmdbd.conf" 600 <<EOF
$MARKER
AuthType=auth/munge
AuthInfo=socket=$ROOT/munge/munge.socket.2
DbdHost=localhost
SlurmUser=root
LogFile=$ROOT/log/slurmdbd.log
PidFile=$(pidfile slurmdbd)
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
}

start_munged() {
    local dir=$ROOT/munge
    mkdir -p "$dir"
    chown munge:munge "$dir"
    chmod 755 "$dir"
    if [[ ! -s $dir/munge.key ]]; then
        dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$dir/munge.key"
    chmod 400 "$dir/munge.key"
    touch "$ROOT/log/munged.log"
    chown munge:munge "$ROOT/log/munged.log"
    # munged refuses to run as root.
    setpriv --reuid=munge --regid=munge --init-groups munged \
        --socket="$dir/munge.socket.2" --key-file="$dir/munge.key" \
        --pid-file="$(pidfile munged)" --log-file="$ROOT/log/munged.log" \
        --seed-file="$dir/munged.seed" </dev/null >>"$ROOT/log/munged.log" 2>&1 ||
        die "munged did not start; its log: $ROOT/log/munged.log"
    wait_for munged sh -c "munge -n -S '$dir/munge.socket.2' | unmunge -S '$dir/munge.socket.2'"
}

start_mariadbd() {
    local data=$ROOT/mariadb
    if [[ ! -d $data/mysql ]]; then
        mkdir -p "$data"
        chown mysql:mysql "$data"
        mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=socket \
            --skip-test-db >>"$ROOT/log/mariadbd.log" 2>&1 ||
            die "mariadb-install-db failed; see $ROOT/log/mariadbd.log"
    fi
    mkdir -p "$ROOT/mariadb-run"
    touch "$ROOT/log/mariadbd.log"
    chown mysql:mysql "$ROOT/log/mariadbd.log" "$ROOT/mariadb-run"
    # No network at all: slurmdbd reaches it through the socket (MYSQL_UNIX_PORT below).
    setsid mariadbd --no-defaults --user=mysql --datadir="$data" --skip-networking \
        --socket="$ROOT/mariadb-run/mariadbd.sock" --pid-file="$(pidfile mariadbd)" \
        --log-error="$ROOT/log/mariadbd.log" --innodb-buffer-pool-size=256M \
        --innodb-lock-wait-timeout=900 </dev/null >>"$ROOT/log/mariadbd.log" 2>&1 &
    wait_for mariadbd mariadb-admin --no-defaults --socket="$ROOT/mariadb-run/mariadbd.sock" ping
}

start_slurmdbd() {
    # The MariaDB client library takes the socket path from MYSQL_UNIX_PORT.
    MYSQL_UNIX_PORT="$ROOT/mariadb-run/mariadbd.sock" slurmdbd </dev/null >>"$ROOT/log/slurmdbd.log" 2>&1 ||
        die "slurmdbd did not start; its log: $ROOT/log/slurmdbd.log"
    wait_for slurmdbd sacctmgr -n list cluster
}

start_slurmctld() {
    mkdir -p "$ROOT/spool/slurmctld"
    slurmctld </dev/null >>"$ROOT/log/slurmctld.log" 2>&1 ||
        die "slurmctld did not start; its log: $ROOT/log/slurmctld.log"
    wait_for slurmctld scontrol ping
}

start_slurmd() {
    mkdir -p "$ROOT/spool/slurmd"
    slurmd </dev/null >>"$ROOT/log/slurmd.log" 2>&1 ||
        die "slurmd did not start; its log: $ROOT/log/slurmd.log"
    wait_for slurmd sh -c "sinfo -h -p cpu -o %t | grep -qvE '[*]|unk|down|inval'"
    # A node drained by an earlier configuration (say, before the GPUs were declared) stays
    # drained across restarts; on this private cluster nothing else drains it.
    if sinfo -h -p cpu -o %t | grep -q drain; then
        scontrol update nodename="$(hostname -s)" state=resume
    fi
}

# Account ACCOUNT, with root and the user who ran sudo as its users.
ensure_account() {
    local users=(root) user
    [[ -n ${SUDO_USER:-} && $SUDO_USER != root ]] && users+=("$SUDO_USER")
    if [[ -z $(sacctmgr -n -P list account "$ACCOUNT" format=account) ]]; then
        sacctmgr -i add account "$ACCOUNT" Description="cptlab test jobs" >/dev/null ||
            die "sacctmgr could not add account $ACCOUNT"
        say "account $ACCOUNT added"
    fi
    for user in "${users[@]}"; do
        if [[ -z $(sacctmgr -n -P list association user="$user" account="$ACCOUNT" format=user) ]]; then
            sacctmgr -i add user "$user" Account="$ACCOUNT" >/dev/null ||
                die "sacctmgr could not add $user to account $ACCOUNT"
            say "$user may charge account $ACCOUNT"
        fi
    done
}

start() {
    [[ $EUID -eq 0 ]] || die "starting the daemons needs root (sudo $0 start)"
    mkdir -p "$ROOT/run" "$ROOT/log" "$ROOT/spool"
    chmod 755 "$ROOT"
    install_packages
    write_configs
    local daemon pid
    if ((${#CHANGED[@]})) && running_pid slurmctld >/dev/null; then
        say "warning: ${CHANGED[*]} changed while SLURM runs; to apply: $0 stop && $0 start"
    fi
    for daemon in "${DAEMONS[@]}"; do
        if pid=$(running_pid "$daemon"); then
            say "$daemon already runs (pid $pid)"
        else
            "start_$daemon"
            say "$daemon started (pid $(running_pid "$daemon" || echo '?'))"
        fi
    done
    ensure_account
}

stop() {
    local daemons=("$@") daemon pid deadline
    ((${#daemons[@]})) || daemons=(slurmd slurmctld slurmdbd mariadbd munged)
    for daemon in "${daemons[@]}"; do
        [[ " ${DAEMONS[*]} " == *" $daemon "* ]] || die "unknown daemon $daemon (${DAEMONS[*]})"
        if ! pid=$(running_pid "$daemon"); then
            say "$daemon is not running"
            continue
        fi
        kill -TERM "$pid"
        deadline=$((SECONDS + WAIT_SECONDS))
        while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
        if [[ -d /proc/$pid ]]; then
            say "$daemon (pid $pid) ignored SIGTERM for ${WAIT_SECONDS} s: SIGKILL"
            kill -KILL "$pid"
        fi
        rm -f "$(pidfile "$daemon")"
        say "$daemon stopped"
    done
}

status() {
    local daemon pid down=0
    for daemon in "${DAEMONS[@]}"; do
        if pid=$(running_pid "$daemon"); then
            echo "$daemon: running (pid $pid)"
        else
            echo "$daemon: not running"
            down=1
        fi
    done
    if running_pid slurmctld >/dev/null; then sinfo -N -o "%N %P %T %c %m %G"; fi
    return $down
}

case ${1:-} in
start) start ;;
stop)
    shift
    stop "$@"
    ;;
status) status ;;
*)
    echo "usage: $0 start | stop [DAEMON...] | status" >&2
    exit 2
    ;;
esac
