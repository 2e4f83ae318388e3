#!/usr/bin/python3
"""tools/chaos in CI (label net; issue 55, docs/faults.md#chaos-soak).

  chaos_soak_test.py          ctest `chaos_soak`: five minutes of tools/chaos on 5 netcluster hosts
                              with head failover and a 3-member etcd, a fault every 30 s on average
                              drawn from every kind
  chaos_soak_test.py drill    ctest `failover_drill`: the failover drill on 4 hosts — the head's
                              host lost with etcd's leader on it, etcd split, etcd's leader's host
                              lost, the head's host dropping every packet, the partitions {head} |
                              {rest} and {head, one} | {two others}, a control connection reset —
                              each judged against the outcome it must have (tools/chaos_drill.py)

Both with --check: the job ends on its own stop, no committed window lost, no node lost that no
fault explains, the losses and final parameters those of a fault-free replay on the same worlds,
and (the drill) each fault's nodes lost and head moves as expected. Goodput figures are printed,
never judged (timings on a shared 2-core machine). Needs root and a built build/tools/troupe;
exits 77 (ctest: skipped) with the reason elsewhere.
"""
import os
import pathlib
import signal
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRILL = "kill_head_etcd_leader,split_etcd,kill_etcd_leader_host,drop_head,partition_head,partition_head_one,reset_control"


def main():
    if os.geteuid() != 0:
        print("chaos: skipped: needs root (network namespaces)")
        return 77
    if not (ROOT / "build" / "tools" / "troupe").exists():
        print("chaos: skipped: build/tools/troupe is missing")
        return 77
    # Within ctest's TIMEOUT (tests/CMakeLists.txt), so that tools/chaos is ended by us, not orphaned.
    if sys.argv[1:] == ["drill"]:
        arguments, seconds = ["--hosts", "4", "--schedule", DRILL], 1100
    else:
        arguments, seconds = ["--minutes", os.environ.get("TROUPE_CHAOS_MINUTES", "5"), "--mtbf", "30",
                              "--seed", os.environ.get("TROUPE_CHAOS_SEED", "5")], 1400
    chaos = subprocess.Popen([sys.executable, str(ROOT / "tools" / "chaos"), *arguments, "--check", "--json"])
    try:
        return chaos.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        print(f"chaos: still running after {seconds} s; interrupting it (it takes its cluster down)")
        chaos.send_signal(signal.SIGINT)
        try:
            chaos.wait(timeout=60)
        except subprocess.TimeoutExpired:
            chaos.kill()
            chaos.wait()
        return 1


if __name__ == "__main__":
    sys.exit(main())
