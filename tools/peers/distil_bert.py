"""Peer benchmark: DistilBERT distillation in PyTorch eager, as HF's distiller.py computes it.

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 distil_bert.py --bf16 1 --micro 8 --accum 4 --steps 6 --threads 1

One process. The teacher is troupe's bert-mini by default (--teacher-layers 4 --hidden 256
--heads 4, FFN 4x hidden, vocab 30522, seq 128): word + position + token-type embeddings and
LayerNorm, torch.nn's TransformerEncoder in BERT's post-LayerNorm GELU form, the MLM head (dense +
GELU + LayerNorm, decoder tied to the word embeddings); frozen (no dropout, no gradients), run
under torch.no_grad(). The student is DistilBERT of the same width with --student-layers layers (no
token types), dropout 0.1, AdamW. Each micro-batch: random tokens (speed only), 15% masked; the
teacher and the student read the same input; the loss is distiller.py's default
5·KL(softmax(t/2) || softmax(s/2))·4 over every token + 2·cross-entropy at the masked positions
+ 1·cosine embedding loss of the last hidden states; backward; the optimizer steps once per
window of --accum micro-batches (gradient clipping 1.0). --bf16 1 runs both forwards and the
backward under CPU autocast to bfloat16.

What is timed: one warm-up window, then --steps windows; samples/s = steps x accum x micro /
seconds; teacher_s is the time in the teacher's forwards. How it checks itself: every window's
loss must be finite and the teacher's parameters unchanged; otherwise "correct" is false and the
exit status 1. Prints one JSON line. Needs Debian's python3-torch.
"""
import argparse, json, math, sys, time
import torch, torch.nn as nn
import torch.nn.functional as F


class MaskedLM(nn.Module):
    def __init__(self, a, layers, token_types):
        super().__init__()
        self.word = nn.Embedding(a.vocab, a.hidden)
        self.position = nn.Embedding(a.seq, a.hidden)
        self.token_type = nn.Embedding(2, a.hidden) if token_types else None
        self.embedding_norm = nn.LayerNorm(a.hidden, eps=1e-12)
        self.embedding_dropout = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(a.hidden, a.heads, 4 * a.hidden, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=False, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head_dense = nn.Linear(a.hidden, a.hidden)
        self.head_norm = nn.LayerNorm(a.hidden, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(a.vocab))
        for m in self.modules():  # BERT's initialisation: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def encode(self, ids):
        h = self.word(ids) + self.position(torch.arange(ids.shape[1]).unsqueeze(0))
        if self.token_type is not None:
            h = h + self.token_type(torch.zeros_like(ids))
        return self.encoder(self.embedding_dropout(self.embedding_norm(h)))

    def logits(self, hidden):
        h = self.head_norm(F.gelu(self.head_dense(hidden)).float())  # torch 1.13's CPU autocast: fp32 into LayerNorm
        return h @ self.word.weight.t() + self.decoder_bias


def frozen(model):
    """Eval-mode maths without eval mode: every dropout probability 0, no gradients. (torch 1.13's
    TransformerEncoder takes a fused fast path in eval mode under no_grad, which fails under CPU
    bf16 autocast.)"""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def distillation_loss(s_logits, t_logits, masked_logits, labels, s_hidden, t_hidden, temperature=2.0):
    ce = F.kl_div(F.log_softmax(s_logits.float() / temperature, -1), F.softmax(t_logits.float() / temperature, -1),
                  reduction="batchmean") * temperature ** 2
    mlm = F.cross_entropy(masked_logits.float(), labels)
    cos = F.cosine_embedding_loss(s_hidden.float(), t_hidden.float(), torch.ones(s_hidden.shape[0]))
    return 5.0 * ce + 2.0 * mlm + 1.0 * cos


def main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    teacher = frozen(MaskedLM(a, a.teacher_layers, True))
    teacher_sum = sum(p.double().sum() for p in teacher.parameters())
    student = MaskedLM(a, a.student_layers, False)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    tokens = torch.Generator().manual_seed(1000)
    losses, teacher_seconds = [], 0.0

    def window():
        nonlocal teacher_seconds
        for _ in range(a.accum):
            ids = torch.randint(104, a.vocab, (a.micro, a.seq), generator=tokens)
            masked = torch.rand((a.micro, a.seq), generator=tokens) < 0.15
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
                started = time.perf_counter()
                with torch.no_grad():
                    t_hidden = teacher.encode(ids).reshape(-1, a.hidden)
                    t_logits = teacher.logits(t_hidden)
                teacher_seconds += time.perf_counter() - started
                s_hidden = student.encode(ids).reshape(-1, a.hidden)
                s_logits = student.logits(s_hidden)
                flat = masked.reshape(-1)
                loss = distillation_loss(s_logits, t_logits, s_logits[flat], ids.reshape(-1)[flat], s_hidden, t_hidden)
            (loss * a.micro).backward()
        losses.append(loss.item())
        for p in student.parameters():
            p.grad.div_(a.accum * a.micro)
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    window()  # warm-up
    teacher_seconds = 0.0
    start = time.perf_counter()
    for _ in range(a.steps):
        window()
    seconds = time.perf_counter() - start
    unchanged = bool(sum(p.double().sum() for p in teacher.parameters()) == teacher_sum)
    correct = all(math.isfinite(x) for x in losses) and unchanged
    samples = a.steps * a.accum * a.micro
    print(json.dumps({"peer": "pytorch-eager-distillation", "torch": torch.__version__,
                      "teacher_layers": a.teacher_layers, "student_layers": a.student_layers, "hidden": a.hidden,
                      "heads": a.heads, "seq": a.seq, "vocab": a.vocab, "micro": a.micro, "accum": a.accum,
                      "threads": a.threads, "bf16": bool(a.bf16), "timed_windows": a.steps,
                      "seconds": round(seconds, 3), "samples_per_s": round(samples / seconds, 3),
                      "teacher_s": round(teacher_seconds, 3), "first_loss": round(losses[0], 4),
                      "last_loss": round(losses[-1], 4), "correct": correct}), flush=True)
    if not correct:
        sys.exit(1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for name, default in dict(teacher_layers=4, student_layers=2, hidden=256, heads=4, seq=128, vocab=30522, micro=8,
                              accum=4, steps=5, threads=1, bf16=0).items():
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=default)
    main(p.parse_args())
