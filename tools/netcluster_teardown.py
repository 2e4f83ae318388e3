"""Taking netcluster clusters down: one by name, and those whose owner has gone.

A cluster made with `up --owner PID` belongs to that process (a test, a benchmark script): the
state records the owner's pid and its start time in clock ticks since boot (/proc/PID/stat field
22), so a recycled pid is not mistaken for the owner. Every `up`, and `reap`, takes down each
recorded cluster whose owner no longer runs: a test killed by a signal cannot run its own
`down`, and its namespaces, bridge and sshds would otherwise stay until somebody removed them by
hand. Clusters made without an owner (by a person, from a shell) are never reaped.
"""
import os
import pathlib
import re
import shutil
import signal
import sys
import time

import netcluster_etcd
import netcluster_slurm
from netcluster_state import STATE_ROOT, ClusterError, load_state, run, state_dir


def kill_namespace_processes(namespace):
    """SIGKILLs every process whose network namespace is `namespace` (sshd, its sessions, troupe nodes)."""
    for _ in range(20):
        pids = [int(p) for p in run("ip", "netns", "pids", namespace, check=False).split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def cluster_namespaces(prefix):
    pattern = re.compile(rf"^{re.escape(prefix)}\d+$")
    names = [line.split()[0] for line in run("ip", "netns", "list", check=False).splitlines() if line.strip()]
    return [name for name in names if pattern.match(name)]


def take_down(prefix):
    """Removes everything a cluster called `prefix` may have made, whether or not its state survived."""
    netcluster_slurm.down(state_dir(prefix))
    netcluster_etcd.down(state_dir(prefix))
    for namespace in cluster_namespaces(prefix):
        kill_namespace_processes(namespace)
        run("ip", "netns", "delete", namespace, check=False)
    links = run("ip", "-o", "link", "show", check=False).splitlines()
    names = [line.split(":")[1].strip().split("@")[0] for line in links if ":" in line]
    for name in names:
        if re.match(rf"^{re.escape(prefix)}(\d+-v|-br)$", name):
            run("ip", "link", "delete", name, check=False)
    shutil.rmtree(state_dir(prefix), ignore_errors=True)


def process_start_ticks(pid):
    """When process `pid` started (clock ticks since boot), or None when no such process runs
    (a zombie, killed and not yet waited for by its parent, has exited too)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count after its end.
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def owner_record(pid):
    """What `up --owner PID` stores; refuses a pid that names no running process."""
    started = process_start_ticks(pid) if pid > 0 else None
    if started is None:
        raise ClusterError(f"--owner: expected the pid of a running process, got {pid}")
    return {"pid": pid, "start_ticks": started}


def owner_gone(owner):
    return process_start_ticks(owner["pid"]) != owner["start_ticks"]


def reap_abandoned():
    """Takes down every recorded cluster whose owner has exited."""
    for directory in sorted(STATE_ROOT.iterdir()) if STATE_ROOT.exists() else []:
        try:
            owner = load_state(directory.name).get("owner")
        except (ClusterError, OSError, ValueError):
            continue  # an `up` still writing its state, or a cluster without one: not ours to judge
        if owner is not None and owner_gone(owner):
            print(f"netcluster: taking down {directory.name!r}: its owner (pid {owner['pid']}) has exited",
                  file=sys.stderr)
            take_down(directory.name)
