#!/usr/bin/python3
"""`troupe prepare` as a user runs it (issue 56): flags it cannot use are refused before any work,
naming the flag; Ctrl-C in the middle of a preparation says how far it got, exits non-zero and
leaves neither the output nor its temporary directory behind; a whole run logs its summary.

  TROUPE_BINARY=build/tools/troupe python3 tests/tools/prepare_cli_test.py
"""
import gzip, os, pathlib, signal, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORDS = ("the old sailor saw a whale near the ship and the young captain said that the sea was "
         "calm . a king sees the storm , which is old ; the whale is young !").split()


def vocabulary():
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))


def document(index):
    return " ".join(WORDS[(index * 7 + i) % len(WORDS)] for i in range(300)) + " .\n"


def run(troupe, *args, timeout=120):
    return subprocess.run([troupe, "prepare", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def expect_refused(troupe, work, args, needle):
    result = run(troupe, *args)
    output = result.stdout + result.stderr
    if result.returncode == 0 or needle not in output:
        sys.exit(f"FAILED: prepare {' '.join(map(str, args))}: expected an error with {needle!r}, got "
                 f"status {result.returncode}:\n{output}")
    if (work / "out").exists():
        sys.exit(f"FAILED: prepare {' '.join(map(str, args))} wrote {work / 'out'}")


def main():
    troupe = os.environ.get("TROUPE_BINARY", str(ROOT / "build/tools/troupe"))
    with tempfile.TemporaryDirectory(prefix="troupe-prepare-cli-") as scratch:
        work = pathlib.Path(scratch)
        (work / "vocab.txt").write_text("\n".join(vocabulary()) + "\n")
        small = work / "small.jsonl.gz"
        with gzip.open(small, "wt") as out:
            for d in range(50):
                out.write('{"meta": {"body": "%s"}}\n' % document(d).strip())
        common = ["--tokenizer", f"wordpiece:{work / 'vocab.txt'}", "--out", work / "out"]
        expect_refused(troupe, work, ["--input", small, "--format", "xml", *common], "--format")
        expect_refused(troupe, work, ["--input", small, "--compression", "rar", *common], "--compression")
        expect_refused(troupe, work, ["--input", small, "--format", "jsonl", "--jsonl-field", "meta..body", *common],
                       "--jsonl-field: expected a key")
        expect_refused(troupe, work, ["--input", small, "--threads", "0", *common], "--threads")
        expect_refused(troupe, work, ["--input", small, "--format", "jsonl", *common], "small.jsonl.gz:1: no field 'text'")
        expect_refused(troupe, work, ["--input", work / "nowhere", *common], "nowhere: input not found")

        whole = run(troupe, "--input", small, "--format", "jsonl", "--jsonl-field", "meta.body", *common)
        if whole.returncode != 0 or "prepared" not in whole.stderr + whole.stdout or not (work / "out").is_dir():
            sys.exit(f"FAILED: a whole preparation:\n{whole.stdout}{whole.stderr}")

        big = work / "big.txt"  # ~130 MB: about 10 s on one thread here
        with big.open("w") as out:
            for d in range(100000):
                out.write(document(d) + "\n")
        process = subprocess.Popen([troupe, "prepare", "--input", big, "--format", "bert", "--threads", "1",
                                    "--tokenizer", f"wordpiece:{work / 'vocab.txt'}", "--out", work / "interrupted"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.5)
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            sys.exit("FAILED: prepare did not stop within 60 s of Ctrl-C")
        leftovers = [p.name for p in work.iterdir() if p.name.startswith("interrupted")]
        if process.returncode == 0 or "interrupted after" not in output or "MB read" not in output or leftovers:
            sys.exit(f"FAILED: Ctrl-C: status {process.returncode}, left {leftovers}, said:\n{output}")
        print(f"Ctrl-C: {output.strip().splitlines()[-1]}")
        print("PASSED")


if __name__ == "__main__":
    main()
