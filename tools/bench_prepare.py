#!/usr/bin/python3
"""The measuring half of tools/bench-prepare (which installs, builds and records): writes the
input, runs `troupe prepare` and the HF peer on it, prints one JSON object. Standard library only."""
import argparse, json, os, pathlib, re, shutil, subprocess, sys, tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_arg(text):
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def documents(corpus):
    files = sorted(p for p in (corpus / "corpus").rglob("*") if p.is_file())
    return ["\n".join(l for l in f.read_text(encoding="utf-8").splitlines() if l.strip()) for f in files]


def bert_documents(path):
    """The documents of a BERT-format file, each as its lines (without their line breaks)."""
    lines = []
    with path.open(encoding="utf-8") as source:
        for line in source:
            if line.strip():
                lines.append(line.rstrip("\n"))
            elif lines:
                yield lines
                lines = []
    if lines:
        yield lines


def write_inputs(docs, size, formats, work):
    """The documents repeated to `size` bytes of BERT's format; each format's file."""
    paths = {}
    bert = work / "corpus.txt"
    written = 0
    with bert.open("w", encoding="utf-8") as out:
        while written < size:
            for doc in docs:
                written += out.write(doc + "\n\n")
                if written >= size:
                    break
    paths["bert"] = bert
    if "file" in formats:  # each document a file of its own, 1,000 to a directory
        files = work / "files"
        for count, lines in enumerate(bert_documents(bert)):
            target = files / f"{count // 1000:05d}" / f"doc-{count:07d}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        paths["file"] = files
    if any(f.startswith("jsonl") for f in formats):
        jsonl = work / "corpus.jsonl"
        with jsonl.open("w", encoding="utf-8") as out:
            for lines in bert_documents(bert):
                out.write(json.dumps({"text": "\n".join(lines)}) + "\n")
        paths["jsonl"] = jsonl
        if "jsonl.gz" in formats:
            subprocess.run(["gzip", "-k", "-6", jsonl], check=True)
            paths["jsonl.gz"] = work / "corpus.jsonl.gz"
        if "jsonl.zst" in formats:
            subprocess.run(["zstd", "-q", "-T0", "-3", jsonl, "-o", work / "corpus.jsonl.zst"], check=True)
            paths["jsonl.zst"] = work / "corpus.jsonl.zst"
    return paths


def timed(command, env=None):
    """Runs under /usr/bin/time: (stdout+stderr, wall seconds, peak RSS in MiB)."""
    result = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", *map(str, command)], capture_output=True,
                            text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"bench-prepare: {' '.join(map(str, command))} failed:\n{result.stdout}{result.stderr}")
    wall, rss = re.findall(r"TIME ([0-9.]+) ([0-9]+)", result.stderr)[-1]
    return result.stdout + result.stderr, float(wall), int(rss) / 1024


def run_troupe(troupe, corpus, path, fmt, threads, work, text_bytes):
    out = work / "data"
    shutil.rmtree(out, ignore_errors=True)
    kind = fmt if fmt in ("bert", "file") else "jsonl"
    log, wall, rss = timed([troupe, "prepare", "--input", path, "--format", kind, "--threads", threads,
                            "--tokenizer", f"wordpiece:{corpus / 'vocab.txt'}", "--out", out])
    m = re.search(r"prepared .*: (\d+) documents, (\d+) train \+ (\d+) validation sequences, (\d+) tokens; "
                  r"([0-9.]+) MB in ([0-9.]+) s", log)
    documents, train, validation, tokens, mb, seconds = m.groups()
    sequences = int(train) + int(validation)
    shutil.rmtree(out, ignore_errors=True)
    # Tokens of text: the sequences' less [CLS] and one or two [SEP] each (counted as the peer counts).
    # MB/s of text (the BERT-format file's bytes), whatever form it was read in.
    return {"format": fmt, "threads": threads, "input_mb": round(float(mb), 1), "text_mb": round(text_bytes / 1e6, 1),
            "documents": int(documents), "sequences": sequences, "seconds": float(seconds), "process_s": wall,
            "peak_rss_mib": round(rss, 1), "mb_per_s": round(text_bytes / 1e6 / float(seconds), 2)}


def run_peer(corpus, path, threads):
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    log, wall, rss = timed(["node", ROOT / "tools/peers/hf_tokenize.mjs", "--vocab", corpus / "vocab.txt",
                            "--input", path], env=env)
    result = json.loads(log.splitlines()[0])
    return {"threads": threads or os.cpu_count(), "seconds": round(result["seconds"], 2),
            "tokens": result["tokens"], "mb_per_s": round(result["bytes"] / 1e6 / result["seconds"], 2),
            "tokens_per_s": round(result["tokens"] / result["seconds"]), "peak_rss_mib": round(rss, 1)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--troupe", required=True)
    parser.add_argument("--corpus", required=True, type=pathlib.Path)
    parser.add_argument("--size", default="200M")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--formats", default="bert")
    parser.add_argument("--no-peer", action="store_true")
    a = parser.parse_args()
    formats = a.formats.split(",")
    with tempfile.TemporaryDirectory(prefix="troupe-bench-prepare-", dir=ROOT / "build") as scratch:
        work = pathlib.Path(scratch)
        paths = write_inputs(documents(a.corpus), size_arg(a.size), formats, work)
        _, _, baseline = timed([a.troupe, "--version"])
        text_bytes = paths["bert"].stat().st_size
        runs = [run_troupe(a.troupe, a.corpus, paths[f], f, t, work, text_bytes)
                for f in formats for t in a.threads.split(",")]
        peer = None if a.no_peer else run_peer(a.corpus, paths["bert"], None)
    bert = {r["threads"]: r for r in runs if r["format"] == "bert"}
    ratios = {}
    if "1" in bert and "2" in bert:
        ratios["troupe_2_over_1_thread"] = round(bert["2"]["mb_per_s"] / bert["1"]["mb_per_s"], 2)
    if peer and "2" in bert:
        ratios["troupe_2_threads_over_hf_all_cores"] = round(bert["2"]["mb_per_s"] / peer["mb_per_s"], 2)
    for r in runs:  # the same text, so the same tokens as the peer's count (checked by ctest hf_token_ids)
        if peer:
            r["tokens_per_s"] = round(peer["tokens"] * r["text_mb"] / (bert[r["threads"]]["text_mb"]) / r["seconds"])
    print(json.dumps({"size": a.size, "baseline_rss_mib": round(baseline, 1), "runs": runs, "peer": peer,
                      "ratios": ratios}))


if __name__ == "__main__":
    main()
