#!/usr/bin/python3
"""tools/chaos in CI (label net; issue 55, docs/faults.md#chaos-soak).

  chaos_soak_test.py          ctest `chaos_soak`: five minutes of tools/chaos on 5 netcluster hosts
                              with head failover and a 3-member etcd, a fault every 30 s on average
                              drawn from every kind, the two-at-once ones included; its seed draws
                              the head's kill and both two-at-once faults in its first five, and
                              the test fails unless they were injected
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
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRILL = "kill_head_etcd_leader,split_etcd,kill_etcd_leader_host,drop_head,partition_head,partition_head_one,reset_control"
SOAK_FAULTS = "kill,kill_head,freeze,slow,cut_host,cut_link,saturate,loss,kill_etcd,kill_head_and_one,cut_head_and_one"
# Seed 338 of SOAK_FAULTS draws kill_head, loss, kill_head_and_one, cut_host, cut_head_and_one,
# slow, kill_head, ... (tools/chaos draws kinds from a stream of their own: the same every run).
SOAK_SEED, SOAK_MUST_INJECT = "338", {"kill_head", "kill_head_and_one", "cut_head_and_one"}


def main():
    if os.geteuid() != 0:
        print("chaos: skipped: needs root (network namespaces)")
        return 77
    if not (ROOT / "build" / "tools" / "troupe").exists():
        print("chaos: skipped: build/tools/troupe is missing")
        return 77
    # Within ctest's TIMEOUT (tests/CMakeLists.txt), so that tools/chaos is ended by us, not orphaned.
    drill = sys.argv[1:] == ["drill"]
    if drill:
        arguments, seconds = ["--hosts", "4", "--schedule", DRILL], 1100
    else:
        arguments, seconds = ["--minutes", os.environ.get("TROUPE_CHAOS_MINUTES", "5"), "--mtbf", "30", "--faults",
                              SOAK_FAULTS, "--seed", os.environ.get("TROUPE_CHAOS_SEED", SOAK_SEED)], 1400
    with tempfile.TemporaryFile("w+") as output:
        status = run_chaos(arguments, seconds, output)
        output.seek(0)
        printed = output.read()
    print(printed, end="", flush=True)
    return status if status or drill else missing_faults(printed)


def run_chaos(arguments, seconds, output):
    """tools/chaos ARGUMENTS --check --json, its output to OUTPUT, within SECONDS; its status."""
    chaos = subprocess.Popen([sys.executable, str(ROOT / "tools" / "chaos"), *arguments, "--check", "--json"],
                             stdout=output, stderr=subprocess.STDOUT)
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


def missing_faults(printed):
    """1 when the soak's report (the last line PRINTED, --json) lacks a fault the seed must draw."""
    report = json.loads(next(line for line in reversed(printed.splitlines()) if line.startswith("{")))
    injected = {fault["kind"] for fault in report["faults"]}
    missing = SOAK_MUST_INJECT - injected if "TROUPE_CHAOS_SEED" not in os.environ else set()
    if missing:
        print(f"chaos: the soak never injected {sorted(missing)}; seed {SOAK_SEED} draws them among its first "
              f"five: has tools/chaos's stream of kinds changed?")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
