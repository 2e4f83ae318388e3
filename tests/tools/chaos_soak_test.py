#!/usr/bin/env python3
"""The chaos soak in CI (ctest `chaos_soak`, label net; issue 55, docs/faults.md#chaos-soak): five
minutes of tools/chaos on 5 netcluster hosts with head failover and a 3-member etcd, a fault every
30 s on average drawn from every kind, and its --check: the job ends on its own stop, no committed
window lost, no node lost that no fault explains, the losses and final parameters those of one
process trained to the same step. The goodput figures are printed, never judged (timings on a
shared 2-core machine). Needs root and a built build/tools/troupe; exits 77 (ctest: skipped) with
the reason elsewhere.
"""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    if os.geteuid() != 0:
        print("chaos soak: skipped: needs root (network namespaces)")
        return 77
    if not (ROOT / "build" / "tools" / "troupe").exists():
        print("chaos soak: skipped: build/tools/troupe is missing")
        return 77
    seed = os.environ.get("TROUPE_CHAOS_SEED", "5")
    minutes = os.environ.get("TROUPE_CHAOS_MINUTES", "5")
    soak = subprocess.run([sys.executable, str(ROOT / "tools" / "chaos"), "--minutes", minutes, "--mtbf", "30",
                           "--seed", seed, "--check", "--json"], timeout=1500)
    return soak.returncode


if __name__ == "__main__":
    sys.exit(main())
