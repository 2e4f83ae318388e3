"""Peer benchmark: PyTorch DistributedDataParallel (gloo, CPU) training a BERT masked-LM encoder.

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 ddp_bert.py --world 2 --bf16 1 --micro 8 --accum 4 --steps 6 --threads 1

The model is troupe's bert-mini by default (--layers 4 --hidden 256 --heads 4, FFN 4x hidden,
vocab 30522, seq 128), initialised as BERT is (N(0, 0.02) weights): word + position + token-type embeddings and LayerNorm, torch.nn's
TransformerEncoder in BERT's post-LayerNorm GELU form with dropout 0.1, and the MLM head
(dense + GELU + LayerNorm, decoder tied to the word embeddings) on the masked positions only,
cross-entropy, AdamW. Tokens are random (speed only); 15% of positions are masked. One window
is --accum micro-batches of --micro sequences; gradients accumulate under DDP.no_sync() and are
allreduced once per window, with the last micro-batch's backward. --bf16 1 runs forward and
backward under CPU autocast to bfloat16. One process per rank (torch.multiprocessing),
rendezvous on 127.0.0.1 at a port the OS hands out (--port to choose one), --threads intra-op
threads per process. Run with OPENBLAS_NUM_THREADS=1 so BLAS does not add threads.

--compress fp16 registers DDP's fp16_compress_hook (torch.distributed.algorithms.ddp_comm_hooks):
each bucket is divided by the world size, cast to fp16, allreduced in fp16 and cast back, halving
the bytes on the wire (gloo in torch 1.13 has no bf16 allreduce, so fp16 is DDP's 16-bit wire here).

What is timed: one warm-up window, a barrier, then --steps windows; samples/s = steps x accum x
micro x world / seconds, on rank 0.

How it checks itself: every window's loss must be finite, and after training every rank must hold
bitwise the same parameters (DDP broadcasts rank 0's at start and every rank applies the same
averaged gradients), compared through the all_reduce MAX and MIN of a float64 checksum of each
parameter. Either failing makes "correct" false and the exit status 1.

Across hosts (one process per host, as torchrun's nodes): --rank R --master ADDR on each host,
the same --world and --port everywhere; rank 0 listens on ADDR:PORT. gloo picks the interface
to ADDR's network unless GLOO_SOCKET_IFNAME says otherwise.

Prints one JSON line with samples_per_s. Needs Debian's python3-torch (apt-get install python3-torch).
"""
import argparse, json, math, os, sys, time
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from free_port import free_port


class BertMLM(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.word = nn.Embedding(a.vocab, a.hidden)
        self.position = nn.Embedding(a.seq, a.hidden)
        self.token_type = nn.Embedding(2, a.hidden)
        self.embedding_norm = nn.LayerNorm(a.hidden, eps=1e-12)
        self.embedding_dropout = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(a.hidden, a.heads, 4 * a.hidden, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=False, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False)
        self.head_dense = nn.Linear(a.hidden, a.hidden)
        self.head_norm = nn.LayerNorm(a.hidden, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(a.vocab))
        for m in self.modules():  # BERT's initialisation: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids, masked, labels):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.word(ids) + self.position(positions) + self.token_type(torch.zeros_like(ids))
        h = self.encoder(self.embedding_dropout(self.embedding_norm(h)))
        h = nn.functional.gelu(self.head_dense(h[masked]))
        h = self.head_norm(h.float())  # torch 1.13's CPU autocast wants fp32 into LayerNorm
        logits = h @ self.word.weight.t() + self.decoder_bias
        return nn.functional.cross_entropy(logits, labels)


def parameter_checksums(model):
    return torch.stack([p.detach().double().sum() for p in model.parameters()])


def run(rank, a):
    os.environ.update(MASTER_ADDR=a.master, MASTER_PORT=str(a.port))
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    distributed = a.world > 1
    if distributed:
        dist.init_process_group("gloo", rank=rank, world_size=a.world)
    model = BertMLM(a)
    ddp = DistributedDataParallel(model) if distributed else model
    if distributed and a.compress == "fp16":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.Generator().manual_seed(1000 + rank)
    losses = []

    def window():
        for i in range(a.accum):
            ids = torch.randint(0, a.vocab, (a.micro, a.seq), generator=tokens)
            masked = torch.rand((a.micro, a.seq), generator=tokens) < 0.15
            last = i == a.accum - 1
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
                if distributed and not last:
                    with ddp.no_sync():
                        ddp(ids, masked, ids[masked]).backward()
                else:
                    loss = ddp(ids, masked, ids[masked])
                    loss.backward()
        losses.append(loss.item())
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    window()  # warm-up
    if distributed:
        dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        window()
    seconds = time.perf_counter() - start
    correct = all(math.isfinite(x) for x in losses)
    if distributed:
        high, low = parameter_checksums(model), -parameter_checksums(model)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        dist.all_reduce(low, op=dist.ReduceOp.MAX)
        flags = torch.tensor([int(correct and torch.equal(high, -low))])
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        correct = bool(flags.item())
    samples = a.steps * a.accum * a.micro * a.world
    if rank == 0:
        print(json.dumps({"peer": "pytorch-ddp-gloo", "torch": torch.__version__, "world": a.world,
                          "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq": a.seq,
                          "vocab": a.vocab, "micro": a.micro, "accum": a.accum, "threads": a.threads,
                          "bf16": bool(a.bf16), "compress": a.compress, "timed_windows": a.steps, "seconds": round(seconds, 3),
                          "samples_per_s": round(samples / seconds, 3),
                          "tokens_per_s": round(samples * a.seq / seconds, 1),
                          "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
                          "correct": correct}), flush=True)
    if distributed:
        # torch 1.13 can deadlock tearing down DDP's reducer and the gloo group at exit (seen
        # here); the results are printed, so the ranks leave together without the teardown.
        dist.barrier()
        os._exit(0 if correct else 1)
    if not correct:
        sys.exit(1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for name, default in dict(world=1, layers=4, hidden=256, heads=4, seq=128, vocab=30522, micro=8, accum=4,
                              steps=5, threads=1, bf16=0, port=0, rank=-1).items():
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--master", default="127.0.0.1", help="rank 0's address (with --rank: across hosts)")
    p.add_argument("--compress", choices=("none", "fp16"), default="none", help="DDP's fp16_compress_hook")
    a = p.parse_args()
    if a.rank >= 0 and (a.rank >= a.world or not a.port):
        sys.exit(f"ddp_bert: --rank {a.rank} needs --rank < --world ({a.world}) and a --port shared by every host")
    a.port = a.port or free_port()
    try:
        if a.rank >= 0:
            run(a.rank, a)  # one rank of a job across hosts
        elif a.world == 1:
            run(0, a)
        else:
            mp.spawn(run, args=(a,), nprocs=a.world)
    except Exception as e:  # a rank failed its check or crashed
        print(f"ddp_bert: {e}", file=sys.stderr)
        sys.exit(1)
