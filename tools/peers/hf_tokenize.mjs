// The peer of `troupe prepare`'s tokenizing: HuggingFace's Rust tokenizers through their npm binding
// (`tokenizers`, pinned in tools/peers/package.json), as bert-base-uncased's BertTokenizerFast is
// built: BertNormalizer (clean text, CJK split, lower case, strip accents), BertPreTokenizer,
// WordPiece with "##" continuations and [UNK] past 100 characters — with no added special tokens,
// so text that spells "[MASK]" is words, as it is for troupe's WordPiece.
//
//   node tools/peers/hf_tokenize.mjs --vocab VOCAB.txt --input FILE [--jsonl FIELD] [--batch LINES] [--ids]
//                                    [--save-json TOKENIZER.json]
//
// Reads FILE's non-blank lines (BERT's blank-line format, or with --jsonl each line's FIELD, dotted
// for nested keys), encodes them with encodeBatch (Rayon's threads on every core, or
// RAYON_NUM_THREADS) in batches of LINES, and prints one JSON object: bytes, lines, tokens, seconds.
// With --ids it prints each line's ids instead (a JSON array per line), for tests that compare;
// --save-json also writes the tokenizer as HF saves it (tokenizer.json).
import { createRequire } from "node:module";
import { createReadStream, readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

function parseArguments(argv) {
  const options = { batch: 2000, ids: false };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    if (flag === "--ids") options.ids = true;
    else if (["--vocab", "--input", "--jsonl", "--batch", "--save-json"].includes(flag) && i + 1 < argv.length)
      options[flag.slice(2)] = argv[++i];
    else throw new Error(`hf_tokenize: unknown or incomplete argument ${flag}`);
  }
  if (!options.vocab || !options.input) throw new Error("hf_tokenize: --vocab and --input are required");
  options.batch = Number(options.batch);
  return options;
}

function bertTokenizer(vocabFile) {
  const vocab = {};
  readFileSync(vocabFile, "utf8").split("\n").forEach((token, id) => {
    if (token.length > 0 && !(token in vocab)) vocab[token] = id;
  });
  const spec = {
    version: "1.0", truncation: null, padding: null, added_tokens: [],
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: null,
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
  };
  return Tokenizer.fromString(JSON.stringify(spec));
}

function textOf(line, field) {
  if (!field) return line;
  let value = JSON.parse(line);
  for (const key of field.split(".")) value = value[key];
  return value;
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const tokenizer = bertTokenizer(options.vocab);
  if (options["save-json"]) tokenizer.save(options["save-json"], true);
  const lines = createInterface({ input: createReadStream(options.input), crlfDelay: Infinity });
  let bytes = 0, count = 0, tokens = 0, batch = [];
  const start = process.hrtime.bigint();
  const flush = async () => {
    if (batch.length === 0) return;
    const encodings = await tokenizer.encodeBatch(batch, { addSpecialTokens: false });
    for (const encoding of encodings) {
      const ids = encoding.getIds();
      tokens += ids.length;
      if (options.ids) process.stdout.write(JSON.stringify(Array.from(ids)) + "\n");
    }
    batch = [];
  };
  for await (const line of lines) {
    bytes += Buffer.byteLength(line) + 1;
    if (line.trim().length === 0) continue;
    // A JSON string's "\n" ends a line, as in troupe prepare: each becomes an input of its own.
    for (const piece of String(textOf(line, options.jsonl)).split("\n")) {
      if (piece.trim().length === 0) continue;
      batch.push(piece);
      ++count;
    }
    if (batch.length >= options.batch) await flush();
  }
  await flush();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (!options.ids) console.log(JSON.stringify({ bytes, lines: count, tokens, seconds }));
}

main().catch((error) => {
  console.error(error.message);
  process.exit(1);
});
