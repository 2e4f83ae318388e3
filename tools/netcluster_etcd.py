"""A real etcd cluster on a netcluster's hosts: `tools/netcluster etcd up|down|env [--members N]`.

One etcd member (Debian's etcd-server 3.4) runs in each of the first N hosts' network namespaces
(default 3), named like its host, listening for clients on ADDRESS:2379 and for its peers on
ADDRESS:2380, at `nice -10` (etcd's leader, starved of the shared cores, was late with its
heartbeats), with etcd's default timings (heartbeat 100 ms, election 1 s) and pre-vote on (etcd
3.5's default; 3.4's is off): a member that was cut off, or lost packets, and comes back does
not call an election that unseats a working leader — which, with leases of 2 s, cost a head its
role in the chaos soak (docs/faults.md#head-failover). Its data, log and pid
file live in /run/netcluster/PREFIX/etcd/HOST/. What the hosts' faults do to a host's links
(`cut`, `loss`, `rate`) they do to its etcd member too, as on a real cluster. `kill HOST` kills
that host's member (SIGKILL, as a crash: its data stays), `start HOST` starts it again on its
data, and it catches up with the others (tools/chaos draws both). `env` prints
TROUPE_ETCD, the client URLs joined by commas, for a manifest's `failover.etcd`
(docs/faults.md#head-failover).
"""
import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.request

from netcluster_state import ClusterError

ETCD = "/usr/bin/etcd"
ETCD_NICE = -10


def etcd_dir(state_dir):
    return pathlib.Path(state_dir) / "etcd"


def members(state):
    return state.get("etcd_members", [])


def client_url(host):
    return f"http://{host['address']}:2379"


def environment(state):
    hosts = [h for h in state["hosts"] if h["name"] in members(state)]
    return {"TROUPE_ETCD": ",".join(client_url(h) for h in hosts)}


def peer_url(host):
    return f"http://{host['address']}:2380"


def start_member(directory, host, cluster_hosts, cluster_state="new"):
    """Starts HOST's member of the cluster of CLUSTER_HOSTS: a new one, or ("existing") one again
    on its data."""
    member = directory / host["name"]
    member.mkdir(parents=True, exist_ok=True)
    peer = peer_url(host)
    initial_cluster = ",".join(f"{h['name']}={peer_url(h)}" for h in cluster_hosts)
    # At a raised CPU priority, as etcd's deployments beside busy processes run it: it shares the
    # machine's cores with every host's training process, and a leader starved for half a second
    # missed its heartbeats and kept a moving head's requests waiting (docs/faults.md#head-failover).
    argv = ["nice", "-n", str(ETCD_NICE), "ip", "netns", "exec", host["name"],
            ETCD, "--name", host["name"], "--data-dir", str(member / "data"),
            "--listen-client-urls", client_url(host), "--advertise-client-urls", client_url(host),
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", initial_cluster, "--initial-cluster-state", cluster_state,
            "--initial-cluster-token", directory.parent.name, "--pre-vote", "--logger", "zap",
            "--log-outputs", str(member / "etcd.log")]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    raise_session_priority(process.pid)
    (member / "etcd.pid").write_text(f"{process.pid}\n")


def raise_session_priority(pid):
    """The member's session at `nice -10` too: with the kernel's autogroups on (Debian's default,
    /proc/sys/kernel/sched_autogroup_enabled), each session shares the cores as one group at the
    group's own nice value, whatever its processes' — so etcd's nice alone weighed nothing against
    the hosts' training processes, each in a session of its own (ssh) (man 7 sched, "The autogroup
    feature")."""
    try:
        pathlib.Path(f"/proc/{pid}/autogroup").write_text(f"{ETCD_NICE}\n")
    except OSError:
        pass  # no autogroups in this kernel: the process's nice is what counts


def healthy(host):
    try:
        with urllib.request.urlopen(client_url(host) + "/health", timeout=0.5) as answer:
            return b'"true"' in answer.read()
    except OSError:
        return False


def healthy_within(hosts, seconds):
    """Whether every one of HOSTS reports healthy within SECONDS."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(healthy(h) for h in hosts):
            return True
        time.sleep(0.2)
    return False


def kill_group(pid_file):
    """SIGKILLs the process group a member's pid file names; nothing when it is gone."""
    try:
        os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def up(state, count):
    if not os.path.exists(ETCD):
        raise ClusterError(f"{ETCD} is missing (tools/install-deps installs etcd-server)")
    if members(state):
        raise ClusterError(f"cluster {state['name']} already runs etcd on {', '.join(members(state))}")
    if count < 1 or count > len(state["hosts"]):
        raise ClusterError(f"--members {count}: between 1 and the cluster's {len(state['hosts'])} hosts")
    hosts = state["hosts"][:count]
    directory = etcd_dir(state["state_dir"])
    state["etcd_members"] = [h["name"] for h in hosts]
    for host in hosts:
        start_member(directory, host, hosts)
    if healthy_within(hosts, 30):
        return
    down(state["state_dir"])
    state["etcd_members"] = []
    raise ClusterError(f"etcd did not become healthy on {', '.join(h['name'] for h in hosts)} within 30 s "
                       f"(logs in {directory}/HOST/etcd.log)")


def member_host(state, name):
    if name not in members(state):
        raise ClusterError(f"no etcd member on {name!r} (members: {', '.join(members(state)) or 'none'})")
    return next(h for h in state["hosts"] if h["name"] == name)


def kill_member(state, name):
    """SIGKILLs the member on host NAME, as its host crashing would; its data stays. Idempotent."""
    member_host(state, name)
    kill_group(etcd_dir(state["state_dir"]) / name / "etcd.pid")


def restart_member(state, name):
    """Starts the member on host NAME again on its data (a member that is running is left as it is);
    waits up to 30 s for it to report healthy, which needs the cluster's quorum."""
    host = member_host(state, name)
    if healthy(host):
        return
    kill_member(state, name)  # one that runs but does not answer
    hosts = [h for h in state["hosts"] if h["name"] in members(state)]
    start_member(etcd_dir(state["state_dir"]), host, hosts, cluster_state="existing")
    if healthy_within([host], 30):
        return
    raise ClusterError(f"etcd member {name} did not become healthy within 30 s of its restart "
                       f"(log: {etcd_dir(state['state_dir']) / name / 'etcd.log'})")


def down(state_dir):
    """Stops every etcd member of the cluster (by pid, its process group) and removes its files; idempotent."""
    directory = etcd_dir(state_dir)
    for pid_file in sorted(directory.glob("*/etcd.pid")):
        kill_group(pid_file)
    shutil.rmtree(directory, ignore_errors=True)
