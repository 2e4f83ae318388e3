"""The faults tools/chaos draws, each a real fault on tools/netcluster hosts: how it is injected,
whom it may hit, and how it is undone.

A fault is one of:
  kill       SIGKILL of a worker node's process (never the head's); the launcher restarts it
  kill_head  SIGKILL of the process holding the head's role; another node takes the role, the
             launcher restarts the killed one, which rejoins as a worker
  freeze     SIGSTOP of a worker node's process, SIGCONT after `seconds`; the job drops it
             meanwhile, and what wakes finds itself dropped, ends, and is restarted
  slow       one host's link down to 10 Mbit/s both ways, back to the cluster's rate after
  cut_host   one host's link down (carrier lost) for `seconds`: any host, the head's included
  cut_link   nftables drops between two hosts for `seconds`, both still reaching the others
  saturate   a bulk TCP stream from one host into another's link for `seconds`
  loss       20 % of one host's packets dropped, both ways, for `seconds`
  kill_etcd  SIGKILL of one etcd member; started again on its data after `seconds`

Each fault is undone before the next is drawn (tools/chaos), so the cluster is never left with
two at once: etcd keeps its quorum (a cut member's host, a killed member: one of three at a time)
and "what did this fault cost" has one answer.
"""
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
from bench_across_hosts import NETCLUSTER, node_processes

KINDS = ("kill", "kill_head", "freeze", "slow", "cut_host", "cut_link", "saturate", "loss", "kill_etcd")
# How long each fault lasts before it is undone (seconds); a kill lasts until the launcher's restart.
DURATION_S = {"kill": 0, "kill_head": 0, "freeze": 5, "slow": 15, "cut_host": 8, "cut_link": 8, "saturate": 15,
              "loss": 15, "kill_etcd": 10}
SINK_PORT = 5999
# A sink that reads whatever arrives, and a source that writes as fast as the link takes for
# SECONDS: run with `python3 -c` inside the hosts (netcluster exec).
SINK = ("import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        f"s.bind(('0.0.0.0',{SINK_PORT}));s.listen(1);c,_=s.accept()\nwhile c.recv(1<<20):pass\n")
SOURCE = ("import socket,sys,time\nc=socket.create_connection((sys.argv[1],{port}),timeout=5)\n"
          "end=time.time()+float(sys.argv[2]);b=bytes(1<<20)\nwhile time.time()<end:c.sendall(b)\n").format(port=SINK_PORT)


class fault_target_missing(Exception):
    """The fault has nothing to hit now (no worker process running, say): drawn again later."""


class cluster_faults:
    """Injects and undoes faults on netcluster NAME whose job runs in RUN_DIR."""

    def __init__(self, name, cluster, etcd_members, run_dir, head_of, rate, rng):
        self.name = name
        self.hosts = [h["name"] for h in cluster["hosts"]]
        self.address = {h["name"]: h["address"] for h in cluster["hosts"]}
        self.etcd_members = etcd_members
        self.run_dir = run_dir
        self.head_of = head_of  # () -> the node holding the head's role now
        self.rate = rate
        self.rng = rng
        self._undo = None

    def netcluster(self, *args):
        subprocess.run([str(NETCLUSTER), *map(str, args), "--name", self.name], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)

    def exec_in(self, host, code, *args):
        """python3 -c CODE ARGS inside HOST, in the background; the process."""
        return subprocess.Popen([str(NETCLUSTER), "exec", "--name", self.name, host, "--", sys.executable, "-c", code,
                                 *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def worker_process(self):
        """(node, pid) of a random running node process that does not hold the head's role."""
        head = self.head_of()
        running = sorted((n, p) for n, p in node_processes(self.run_dir).items() if n != head)
        if not running:
            raise fault_target_missing("no worker process runs")
        return self.rng.choice(running)

    def head_process(self):
        """(node, pid) of the process holding the head's role."""
        head = self.head_of()
        pid = node_processes(self.run_dir).get(head)
        if pid is None:
            raise fault_target_missing(f"the head {head} has no process")
        return head, pid

    def inject(self, kind):
        """Injects a fault of KIND; returns what it hit ({"node"} or {"host"}, {"peer"})."""
        seconds = DURATION_S[kind]
        if kind in ("kill", "freeze"):
            node, pid = self.worker_process()
            os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
            if kind == "freeze":
                self._undo = lambda: self.wake(pid)
            return {"node": node}
        if kind == "kill_head":
            head, pid = self.head_process()
            os.kill(pid, signal.SIGKILL)
            return {"node": head}
        host = self.rng.choice(self.hosts)
        if kind == "slow":
            self.netcluster("rate", host, "10mbit")
            self._undo = lambda: self.netcluster("rate", host, self.rate)
        elif kind == "cut_host":
            self.netcluster("cut", host)
            self._undo = lambda: self.netcluster("heal", host)
        elif kind == "loss":
            self.netcluster("loss", host, 20)
            self._undo = lambda: self.netcluster("loss", host, 0)
        elif kind == "cut_link":
            peer = self.rng.choice([h for h in self.hosts if h != host])
            self.netcluster("cut", host, peer)
            self._undo = lambda: self.netcluster("heal", host)
            return {"host": host, "peer": peer}
        elif kind == "saturate":
            source = self.rng.choice([h for h in self.hosts if h != host])
            sink = self.exec_in(host, SINK)
            time.sleep(0.5)
            stream = self.exec_in(source, SOURCE, self.address[host], seconds)
            self._undo = lambda: self._stop(stream, sink)
            return {"host": host, "peer": source}
        elif kind == "kill_etcd":
            host = self.rng.choice(self.etcd_members)
            self.netcluster("etcd", "kill", host)
            self._undo = lambda: self.netcluster("etcd", "start", host)
        return {"host": host}

    def undo_with(self, undo):
        """What undo() will do for the fault just injected (the drill's faults, tools/chaos_drill.py)."""
        self._undo = undo

    def undo(self):
        """Undoes the fault injected last (nothing for a kill: the launcher restarts the node)."""
        undo, self._undo = self._undo, None
        if undo:
            undo()

    @staticmethod
    def wake(pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # killed meanwhile (its ssh session gave up on it)

    @staticmethod
    def _stop(*processes):
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def draw_gap(rng, mean_s, least_s):
    """Seconds from one fault's start to the next: exponential with MEAN_S (faults arriving as a
    Poisson process), at least LEAST_S (the fault's own duration and the job's recovery)."""
    return max(least_s, rng.expovariate(1.0 / mean_s))
