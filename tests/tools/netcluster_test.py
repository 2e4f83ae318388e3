#!/usr/bin/python3
"""tools/netcluster, from the outside (ctest `netcluster`, label net): up, ssh, exec, the hosts'
isolation, rate, loss, cut (link, drop, pair, one port, a partition in one command), heal, a down
that leaves nothing behind, also after the script was killed halfway, and the reaping of clusters
whose --owner has exited. Needs root; exits 77 (ctest: skipped) with the reason elsewhere.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import unittest
import urllib.request

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tools" / "netcluster"
PREFIX = f"nt{os.getpid() % 100000}"


def netcluster(*args, check=True, prefix=PREFIX):
    result = subprocess.run([sys.executable, str(SCRIPT), args[0], "--name", prefix, *args[1:]], capture_output=True,
                            text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"netcluster {' '.join(args)}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def reaches(host, address, port=22):
    """Whether a TCP connection from `host` to address:port opens within 2 s."""
    probe = f"exec 3<>/dev/tcp/{address}/{port}"
    return subprocess.run(["timeout", "2", "ip", "netns", "exec", host, "bash", "-c", probe],
                          capture_output=True).returncode == 0


def leftovers(prefix=PREFIX):
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [line.split()[0] for line in namespaces.splitlines() if line.startswith(prefix)]
    found += [line.split(":")[1].strip() for line in links.splitlines() if f" {prefix}" in line]
    sshd = subprocess.run(["pgrep", "-af", f"/run/netcluster/{prefix}/"], capture_output=True, text=True).stdout
    found += sshd.splitlines()
    if pathlib.Path(f"/run/netcluster/{prefix}").exists():
        found.append(f"/run/netcluster/{prefix}")
    return found


class netcluster_test(unittest.TestCase):
    def setUp(self):
        self.addCleanup(lambda: netcluster("down", check=False))
        self.view = json.loads(netcluster("up", "2").stdout)
        self.a, self.b = self.view["hosts"]

    def ssh(self, host, command):
        return subprocess.run(["ssh", "-F", self.view["ssh_config"], host, command], capture_output=True, text=True,
                              timeout=30)

    def test_hosts_are_separate_and_reachable_over_ssh(self):
        self.assertTrue(self.a["address"].startswith("198.18.") and self.b["address"].startswith("198.18."))
        self.assertEqual(self.ssh(self.a["name"], "hostname").stdout.strip(), self.a["name"])
        self.assertEqual(self.ssh(self.b["address"], "hostname").stdout.strip(), self.b["name"])
        # Sessions start as on a fresh machine: a HOME of the host's own, not this machine's root's
        # (whose start-up files once made every session wait 60 s on a stale pyenv lock).
        self.assertEqual(self.ssh(self.a["name"], "echo $HOME").stdout.strip(),
                         f"/run/netcluster/{PREFIX}/home/{self.a['name']}")
        out = netcluster("exec", self.b["name"], "--", "hostname").stdout.strip()
        self.assertEqual(out, self.b["name"])
        # Shared memory does not cross hosts: /dev/shm is each host's own.
        netcluster("exec", self.a["name"], "--", "touch", "/dev/shm/netcluster-probe")
        self.assertEqual(self.ssh(self.a["name"], "ls /dev/shm").stdout.split(), ["netcluster-probe"])
        self.assertNotIn("netcluster-probe", self.ssh(self.b["name"], "ls /dev/shm").stdout)
        self.assertFalse(pathlib.Path("/dev/shm/netcluster-probe").exists())
        manifest = json.loads(pathlib.Path(self.view["manifest"]).read_text())
        self.assertEqual([n["host"] for n in manifest["nodes"]], [self.a["address"], self.b["address"]])
        self.assertEqual(manifest["head"]["host"], self.a["address"])
        self.assertEqual(pathlib.Path(self.view["hostfile"]).read_text().split("\n")[0], f"{self.a['address']} slots=1")

    def test_rate_loss_cut_and_heal(self):
        netcluster("rate", self.a["name"], "10mbit")
        tc = lambda *what: subprocess.run(["ip", "netns", "exec", self.a["name"], "tc", *what, "show", "dev", "eth0"],
                                          capture_output=True, text=True).stdout
        self.assertIn("htb", tc("qdisc"))
        self.assertIn("10Mbit", tc("class"))
        self.assertIn("match 00c00000/00fc0000", tc("filter"))  # DSCP CS6: control traffic, its own class
        self.assertTrue(reaches(self.a["name"], self.b["address"]))
        netcluster("rate", self.a["name"], "10mbit", "--fifo")
        self.assertIn("tbf", tc("qdisc"))
        netcluster("rate", self.a["name"], "off")
        self.assertTrue(reaches(self.a["name"], self.b["address"]))

        netcluster("loss", self.a["name"], "100")
        self.assertFalse(reaches(self.a["name"], self.b["address"]))
        netcluster("loss", self.a["name"], "0")
        self.assertTrue(reaches(self.a["name"], self.b["address"]))

        netcluster("cut", self.a["name"])  # the link goes down
        self.assertFalse(reaches(self.b["name"], self.a["address"]))
        netcluster("heal", self.a["name"])
        self.assertTrue(reaches(self.b["name"], self.a["address"]))

        netcluster("cut", self.a["name"], "--drop")  # the link stays up, every packet is dropped
        carrier = subprocess.run(["ip", "netns", "exec", self.a["name"], "cat", "/sys/class/net/eth0/carrier"],
                                 capture_output=True, text=True).stdout.strip()
        self.assertEqual(carrier, "1")
        self.assertFalse(reaches(self.b["name"], self.a["address"]))
        netcluster("heal", self.a["name"])
        self.assertTrue(reaches(self.b["name"], self.a["address"]))

        netcluster("cut", self.a["name"], self.b["name"])  # one pair: both still reach the bridge
        self.assertFalse(reaches(self.a["name"], self.b["address"]))
        self.assertFalse(reaches(self.b["name"], self.a["address"]))
        bridge = self.view["subnet"].rsplit(".", 1)[0] + ".254"
        self.assertEqual(subprocess.run(["ip", "netns", "exec", self.a["name"], "ip", "route", "get", bridge],
                                        capture_output=True).returncode, 0)
        netcluster("heal", self.b["name"])
        self.assertTrue(reaches(self.a["name"], self.b["address"]))

        netcluster("cut", self.a["name"], self.b["name"], "--port", "22")  # that port only, both ways
        self.assertFalse(reaches(self.a["name"], self.b["address"]))
        self.assertFalse(reaches(self.b["name"], self.a["address"]))
        listener = subprocess.Popen(["ip", "netns", "exec", self.b["name"], sys.executable, "-c",
                                     "import socket,time;s=socket.create_server(('0.0.0.0',2380));time.sleep(30)"])
        self.addCleanup(listener.kill)
        deadline = time.monotonic() + 5
        while not reaches(self.a["name"], self.b["address"], 2380) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertTrue(reaches(self.a["name"], self.b["address"], 2380))  # another port passes
        netcluster("heal", self.a["name"])
        self.assertTrue(reaches(self.a["name"], self.b["address"]))

    def test_a_partition_in_one_command(self):
        netcluster("down")
        a, b, c = json.loads(netcluster("up", "3").stdout)["hosts"]
        netcluster("cut", a["name"], b["name"], c["name"])  # {a} | {b, c}
        for one, other in ((a, b), (a, c), (b, a), (c, a)):
            self.assertFalse(reaches(one["name"], other["address"]), f"{one['name']} -> {other['name']}")
        self.assertTrue(reaches(b["name"], c["address"]))
        netcluster("heal", a["name"])
        for one, other in ((a, b), (a, c), (c, a)):
            self.assertTrue(reaches(one["name"], other["address"]), f"{one['name']} -> {other['name']}")

    def test_an_etcd_member_killed_and_started_again_rejoins_its_cluster(self):
        if not pathlib.Path("/usr/bin/etcd").exists():
            self.skipTest("etcd-server is not installed")
        self.addCleanup(lambda: netcluster("etcd", "down", check=False))
        netcluster("etcd", "up", "--members", "2")

        def health(host):
            try:
                with urllib.request.urlopen(f"http://{host['address']}:2379/health", timeout=2) as answer:
                    return answer.read().decode()
            except OSError:
                return ""

        self.assertIn('"true"', health(self.b))
        netcluster("etcd", "kill", self.b["name"])
        time.sleep(3)  # past the election timeout (1 s): the survivor knows it has no quorum
        self.assertEqual(health(self.b), "")  # nothing listens
        self.assertNotIn('"true"', health(self.a))  # one of two members: no quorum
        netcluster("etcd", "start", self.b["name"])  # waits for it to be healthy: the quorum is back
        self.assertIn('"true"', health(self.a))
        self.assertIn("no etcd member", netcluster("etcd", "kill", "nosuchhost", check=False).stderr)

    def test_bad_input_is_refused_naming_it(self):
        self.assertIn("RATE: expected a tc rate", netcluster("rate", self.a["name"], "fast", check=False).stderr)
        self.assertIn("PCT: expected 0..100", netcluster("loss", self.a["name"], "150", check=False).stderr)
        self.assertIn("no host 'zz'", netcluster("cut", "zz", check=False).stderr)
        self.assertIn("name the PEER", netcluster("cut", self.a["name"], "--port", "22", check=False).stderr)
        self.assertIn("exists", netcluster("up", "2", check=False).stderr)
        self.assertIn("--owner: expected the pid of a running process, got 0",
                      netcluster("up", "1", "--owner", "0", check=False, prefix=PREFIX + "o").stderr)
        self.assertEqual(leftovers(PREFIX + "o"), [])

    def test_a_cluster_whose_owner_exited_is_taken_down_by_the_next_up_or_reap(self):
        owned = PREFIX + "o"  # the owner: a process that exits as a test killed by a signal would
        self.addCleanup(lambda: netcluster("down", check=False, prefix=owned))
        owner = subprocess.Popen(["sleep", "600"])
        netcluster("up", "1", "--owner", str(owner.pid), prefix=owned)
        netcluster("reap")
        self.assertNotEqual(leftovers(owned), [], "reaped while its owner still ran")
        owner.kill()  # not waited for yet: a zombie has exited too
        time.sleep(0.2)
        self.assertIn(f"taking down '{owned}': its owner (pid {owner.pid}) has exited", netcluster("reap").stderr)
        self.assertEqual(leftovers(owned), [])
        owner.wait(timeout=10)
        self.assertNotEqual(leftovers(), [], "a cluster made without --owner was reaped")
        # The next `up` reaps too, whoever calls it.
        owner = subprocess.Popen(["sleep", "600"])
        netcluster("up", "1", "--owner", str(owner.pid), prefix=owned)
        owner.kill()
        owner.wait(timeout=10)
        netcluster("down", prefix=PREFIX + "x")  # nothing of that name: only the reaping matters
        netcluster("up", "1", prefix=PREFIX + "x")
        self.addCleanup(lambda: netcluster("down", check=False, prefix=PREFIX + "x"))
        self.assertEqual(leftovers(owned), [])

    def test_down_leaves_nothing_even_after_a_killed_up(self):
        netcluster("down")
        self.assertEqual(leftovers(), [])
        netcluster("down")  # idempotent
        # An `up` killed halfway: its state is gone, its namespace and sshd are not.
        subprocess.run(["ip", "netns", "add", f"{PREFIX}1"], check=True)
        subprocess.run(["ip", "link", "add", f"{PREFIX}-br", "type", "bridge"], check=True)
        sleeper = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}1", "sleep", "600"])
        netcluster("down")
        self.assertEqual(sleeper.wait(timeout=10), -9)
        self.assertEqual(leftovers(), [])


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces, a bridge and one sshd per host)")
        sys.exit(77)
    for tool in ("sshd", "nft", "tc", "nsenter"):
        if shutil.which(tool) is None and not pathlib.Path(f"/usr/sbin/{tool}").exists():
            print(f"skipped: {tool} is missing (tools/install-deps installs it)")
            sys.exit(77)
    unittest.main(verbosity=2)
