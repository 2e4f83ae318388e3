#!/usr/bin/env python3
"""configs/k8s/*.yaml pass tools/k8s/validate (the Kubernetes API schemas, then what troupe's
environment path needs), and manifests with a flaw each fail, naming it.

  python3 tests/tools/k8s_validate_test.py MODULES_DIR
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
VALIDATE = ROOT / "tools" / "k8s" / "validate"
GOOD = ROOT / "configs" / "k8s" / "train.yaml"

# (what to replace in train.yaml, with what, the message the validator must print)
FLAWS = [
    ("completions: 2 ", "completions: two ", "spec/completions must be integer"),
    ('value: "troupe-{index}.troupe"', 'value: "node-{index}.troupe"', "TROUPE_HOST_TEMPLATE: expected \"troupe-{index}.troupe"),
    ("completionMode: Indexed", "completionMode: NonIndexed", "spec.completionMode: expected Indexed"),
    ("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds: expected more"),
    ("clusterIP: None", "clusterIP: 10.0.0.1", "subdomain: expected the name of a headless Service"),
    ("kind: Service", "kind: Sevrice", "v1 Sevrice: no schema here"),
]


def validate(modules, path):
    return subprocess.run([str(VALIDATE), "--modules", modules, str(path)], text=True, capture_output=True, timeout=300)


def main(modules):
    failures = []
    good = validate(modules, GOOD)
    if good.returncode != 0:
        failures.append(f"{GOOD} should pass: {good.stdout}{good.stderr}")
    text = GOOD.read_text()
    with tempfile.TemporaryDirectory() as scratch:
        for old, new, expected in FLAWS:
            if old not in text:
                failures.append(f"train.yaml no longer contains {old!r}: update this test")
                continue
            flawed = pathlib.Path(scratch) / "flawed.yaml"
            flawed.write_text(text.replace(old, new, 1))
            result = validate(modules, flawed)
            if result.returncode == 0 or expected not in result.stderr:
                failures.append(f"{new!r}: expected a failure naming {expected!r}, got status {result.returncode}: "
                                f"{result.stderr.strip()}")
    for failure in failures:
        print("FAIL:", failure)
    print(f"k8s manifests: {len(FLAWS) + 1 - len(failures)} of {len(FLAWS) + 1} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
