"""A real Slurm cluster on a netcluster's hosts: `tools/netcluster slurm up|down|env`.

One munged and one slurmctld run on this machine (the bridge side, under its own short hostname,
which is what slurmctld checks SlurmctldHost against); one slurmd runs on every host, NodeName the
host's name, NodeAddr its address. Everything lives in /run/netcluster/PREFIX/slurm/: the munge
key and socket, slurm.conf, a hosts file every host sees as /etc/hosts (so the hosts resolve each
other's names, as on a real cluster), spool and state directories, logs and pid files. Clients
(sbatch, srun, squeue, scontrol, sinfo) find the cluster through SLURM_CONF, which `env` prints.

What slurmd needs here (docs/cluster.md#a-slurm-cluster-on-one-machine):
  - slurmd 22.05 looks at /sys/fs/cgroup even with proctrack/linuxproc and task/none, and
    `ip netns exec` remounts /sys without it. So each slurmd enters its host's network namespace
    with nsenter, takes new mount, UTS and IPC namespaces, moves the cgroup mount aside, mounts the
    namespace's own sysfs and moves cgroup back; then a private /dev/shm (no shared memory across
    hosts, as for the hosts' sshd), the cluster's /etc/hosts, and the host's name.
  - Debian's init scripts do not run here: the daemons are started and stopped by their pids.
  - Requeue waits for munge credentials to expire: AuthInfo cred_expire=10 (default 120 s), and
    the scheduler runs every 2 s, so a requeued job starts again after about 15 s.
"""
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import time

from netcluster_state import ClusterError, run

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sinfo")
SLURMD_ENTRY = """set -e
aside=$1; hosts=$2; name=$3; shift 3
mount --rbind /sys/fs/cgroup "$aside"
mount -t sysfs sysfs /sys
mount --move "$aside" /sys/fs/cgroup
mount -t tmpfs -o mode=1777 shm /dev/shm
mount --bind "$hosts" /etc/hosts
hostname "$name"
exec "$@"
"""


def slurm_dir(state):
    return pathlib.Path(state["state_dir"]) / "slurm"


def conf_path(state):
    return slurm_dir(state) / "slurm.conf"


def environment(state):
    return {"SLURM_CONF": str(conf_path(state))}


def check_installed():
    for tool in DAEMONS:
        if not os.path.exists(tool):
            raise ClusterError(f"{tool} is missing (tools/install-deps installs slurmctld, slurmd, slurm-client "
                               "and munge)")


def free_tcp_port():
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def write_files(state, directory, controller):
    (directory / "munge").mkdir(parents=True)
    key = directory / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    lines = ["127.0.0.1 localhost", f"{state['bridge_address']} {controller}"]
    lines += [f"{h['address']} {h['name']}" for h in state["hosts"]]
    (directory / "hosts").write_text("\n".join(lines) + "\n")
    for sub in ("state", "spool", "cgroup-aside"):
        (directory / sub).mkdir()
    for host in state["hosts"]:
        (directory / "spool" / host["name"]).mkdir()
    cpus = os.cpu_count() or 1
    nodes = [f"NodeName={h['name']} NodeAddr={h['address']} CPUs={cpus} Sockets=1 CoresPerSocket={cpus} "
             f"ThreadsPerCore=1 State=UNKNOWN" for h in state["hosts"]]
    conf_path(state).write_text("\n".join([
        f"# The Slurm cluster of netcluster {state['name']} (tools/netcluster slurm up)",
        f"ClusterName={state['name']}",
        f"SlurmctldHost={controller}({state['bridge_address']})",
        f"SlurmctldPort={free_tcp_port()}",
        "SlurmdPort=6818",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={directory / 'munge' / 'munge.socket'},cred_expire=10",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "ReturnToService=1",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=2,bf_interval=1",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}/%n",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'slurmd-%n.log'}",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MinJobAge=60",
        "KillWait=30",
        *nodes,
        "PartitionName=hosts Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ""]))


def start_munged(directory):
    munge = directory / "munge"
    run("/usr/sbin/munged", "--force", f"--key-file={munge / 'munge.key'}", f"--socket={munge / 'munge.socket'}",
        f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}")


def start_slurmd(state, directory, host):
    entry = ["nsenter", f"--net=/run/netns/{host['name']}", "unshare", "--mount", "--uts", "--ipc",
             "--propagation", "slave", "sh", "-c", SLURMD_ENTRY, "slurmd-entry",
             str(directory / "cgroup-aside"), str(directory / "hosts"), host["name"],
             "/usr/sbin/slurmd", "-D", "-N", host["name"]]
    log = open(directory / f"slurmd-{host['name']}.out", "ab")
    subprocess.Popen(entry, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                     env={**os.environ, **environment(state)})


def wait_until_idle(state, directory, timeout_s=30.0):
    """Until sinfo shows every node idle; names the ones that are not, and the log to read."""
    names = {h["name"] for h in state["hosts"]}
    env = {**os.environ, **environment(state)}
    deadline = time.monotonic() + timeout_s
    states = {}
    while time.monotonic() < deadline:
        result = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, text=True, capture_output=True)
        states = dict(line.split() for line in result.stdout.splitlines() if len(line.split()) == 2)
        if all(states.get(name) == "idle" for name in names):
            return
        time.sleep(0.2)
    late = sorted(name for name in names if states.get(name) != "idle")
    raise ClusterError(f"slurm: nodes {', '.join(late)} not idle within {timeout_s:.0f} s (states {states}); "
                       f"see {directory}/slurmd-*.log and slurmctld.log")


def up(state):
    check_installed()
    directory = slurm_dir(state)
    if directory.exists():
        raise ClusterError(f"slurm runs on cluster {state['name']} already ({directory}); `slurm down` first")
    try:
        write_files(state, directory, socket.gethostname().split(".")[0])
        start_munged(directory)
        run("/usr/sbin/slurmctld", "-i", "-f", str(conf_path(state)))
        for host in state["hosts"]:
            start_slurmd(state, directory, host)
        wait_until_idle(state, directory)
    except BaseException:
        down(state["state_dir"])
        raise


def kill_by_pid_file(path, grace_s=5.0):
    try:
        pid = int(pathlib.Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def down(cluster_state_dir):
    """Stops slurmctld, every slurmd and munged of the cluster (by pid) and removes its files; idempotent.
    Job processes left on the hosts go with the hosts' namespaces (netcluster down)."""
    directory = pathlib.Path(cluster_state_dir) / "slurm"
    if not directory.exists():
        return
    for pid_file in sorted(directory.glob("slurmd-*.pid")):
        kill_by_pid_file(pid_file)
    kill_by_pid_file(directory / "slurmctld.pid")
    kill_by_pid_file(directory / "munge" / "munged.pid")
    shutil.rmtree(directory, ignore_errors=True)
