#!/usr/bin/python3
"""configs/k8s/*.yaml pass tools/k8s/validate (the Kubernetes API schemas, then what troupe's
environment path needs, with failover too), and manifests with a flaw each fail, naming it.

  python3 tests/tools/k8s_validate_test.py MODULES_DIR
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
VALIDATE = ROOT / "tools" / "k8s" / "validate"
GOOD = ROOT / "configs" / "k8s" / "train.yaml"
FAILOVER = ROOT / "configs" / "k8s" / "train-failover.yaml"

# (what to replace in train.yaml, with what, the message the validator must print)
FLAWS = [
    ("completions: 2 ", "completions: two ", "spec/completions must be integer"),
    ('value: "troupe-{index}.troupe"', 'value: "node-{index}.troupe"', "TROUPE_HOST_TEMPLATE: expected \"troupe-{index}.troupe"),
    ("completionMode: Indexed", "completionMode: NonIndexed", "spec.completionMode: expected Indexed"),
    ("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds: expected more"),
    ("clusterIP: None", "clusterIP: 10.0.0.1", "subdomain: expected the name of a headless Service"),
    ("kind: Service", "kind: Sevrice", "v1 Sevrice: no schema here"),
]
# The same for train-failover.yaml.
FAILOVER_FLAWS = [
    ("backoffLimitPerIndex: 3", "backoffLimitPerIndex: 0", "spec.backoffLimitPerIndex: expected at least 1 with failover"),
    ("restartPolicy: Never", "restartPolicy: OnFailure", "restartPolicy: expected Never"),
    ("--manifest /etc/troupe/manifest.json", "--manifest /etc/other/manifest.json", "expected a ConfigMap of this file mounted"),
    ('"lease_s": 5', '"lease_s": 5,', "ConfigMap troupe-manifest: not JSON"),
    ('"etcd": ["http://troupe-etcd-0', '"etcd": [], "x": ["http://troupe-etcd-0', "failover.etcd: expected the etcd client URLs"),
]


def validate(modules, path):
    return subprocess.run([str(VALIDATE), "--modules", modules, str(path)], text=True, capture_output=True, timeout=300)


def check(modules, good_file, flaws, scratch):
    """The failures: good_file must pass, each flawed variant fail naming its flaw."""
    failures = []
    good = validate(modules, good_file)
    if good.returncode != 0:
        failures.append(f"{good_file} should pass: {good.stdout}{good.stderr}")
    text = good_file.read_text()
    for old, new, expected in flaws:
        if old not in text:
            failures.append(f"{good_file.name} no longer contains {old!r}: update this test")
            continue
        flawed = pathlib.Path(scratch) / "flawed.yaml"
        flawed.write_text(text.replace(old, new, 1))
        result = validate(modules, flawed)
        if result.returncode == 0 or expected not in result.stderr:
            failures.append(f"{new!r}: expected a failure naming {expected!r}, got status {result.returncode}: "
                            f"{result.stderr.strip()}")
    return failures


def main(modules):
    with tempfile.TemporaryDirectory() as scratch:
        failures = check(modules, GOOD, FLAWS, scratch) + check(modules, FAILOVER, FAILOVER_FLAWS, scratch)
    for failure in failures:
        print("FAIL:", failure)
    checks = len(FLAWS) + len(FAILOVER_FLAWS) + 2
    print(f"k8s manifests: {checks - len(failures)} of {checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
