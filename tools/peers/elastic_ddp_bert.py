"""Peer benchmark for `troupe bench recovery`: PyTorch's elastic launcher restarting a DDP job.

  /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 --max_restarts 1 \
      --redirects 1 --tee 2 --log_dir DIR/logs elastic_ddp_bert.py --steps 12 --kill-rank 3 --kill-step 5 --dir DIR

(--redirects and --tee must be given: Debian's torch 1.13 on Python 3.11 cannot parse their
default "0", as Python 3.11's Flag enums no longer list the zero member.)

What a PyTorch user does to survive a lost worker: torchrun (torch.distributed.run) with
--max_restarts, and a training script that checkpoints every window and resumes from the last
checkpoint when torchrun starts it again. The model is ddp_bert.py's BertMLM (BERT masked-LM,
random tokens), DDP over gloo on CPU, AdamW, --accum micro-batches of --micro sequences per
window with DDP.no_sync(); rank 0 saves the model, the optimizer and the step after every window
(torch.save to a temporary file, then os.replace).

The fault: in the first run (TORCHELASTIC_RESTART_COUNT 0), rank --kill-rank SIGKILLs itself at
the start of window --kill-step. torchrun notices the dead worker (it polls every
--monitor_interval seconds), stops the others and starts every worker again; they load the
checkpoint and go on.

Events, one JSON line each in DIR/events.jsonl (unix_s is the wall clock):
  {"event": "fault", "step": S}                       just before the SIGKILL
  {"event": "start", "restart": R, "rank": 0}          a worker process of run R is up
  {"event": "window", "step": S, "restart": R}         rank 0 finished window S (checkpoint saved)
On the last window rank 0 writes one JSON line to DIR/result.json: recover_s (the fault to the first window finished
after the restart), restart_s (the fault to the restarted workers being up), windows_lost (the
step in flight at the fault less the checkpoint's step), samples/s before and after, and
"correct" (every loss finite).
"""
import argparse, json, math, os, signal, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from ddp_bert import BertMLM


def event(path, **fields):
    fields["unix_s"] = time.time()
    with open(path, "a") as f:
        f.write(json.dumps(fields) + "\n")


def summary(path, a, world):
    events = [json.loads(line) for line in open(path)]
    fault = next(e for e in events if e["event"] == "fault")
    restarted = [e for e in events if e["event"] == "start" and e["restart"] > 0]
    windows = [e for e in events if e["event"] == "window"]
    before = [e for e in windows if e["restart"] == 0]
    after = [e for e in windows if e["restart"] > 0]
    samples = a.micro * a.accum * world

    def rate(ws):  # windows per second between consecutive window ends, as samples/s
        gaps = sorted(b["unix_s"] - p["unix_s"] for p, b in zip(ws, ws[1:]))
        return round(samples / gaps[len(gaps) // 2], 3) if gaps else None

    return {"peer": "torchrun-elastic-ddp-gloo", "torch": torch.__version__, "world": world,
            "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq": a.seq, "micro": a.micro,
            "accum": a.accum, "kill_step": a.kill_step, "max_restarts": 1,
            "restart_s": round(restarted[0]["unix_s"] - fault["unix_s"], 3) if restarted else None,
            "recover_s": round(after[0]["unix_s"] - fault["unix_s"], 3) if after else None,
            "windows_lost": a.kill_step - (after[0]["step"] - 1) if after else None,
            "samples_per_s_before": rate(before), "samples_per_s_after": rate(after[1:])}


def main():
    p = argparse.ArgumentParser()
    for name, default in dict(layers=2, hidden=128, heads=2, seq=64, vocab=30522, micro=4, accum=2, steps=12,
                              threads=1, kill_rank=3, kill_step=5).items():
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=default)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    events, checkpoint = os.path.join(a.dir, "events.jsonl"), os.path.join(a.dir, "checkpoint.pt")
    if rank == 0:
        event(events, event="start", restart=restart, rank=rank)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    model = BertMLM(a)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    tokens = torch.Generator().manual_seed(1000 + rank)
    correct = True
    while step < a.steps:
        if restart == 0 and rank == a.kill_rank and step + 1 == a.kill_step:
            event(events, event="fault", step=a.kill_step)
            os.kill(os.getpid(), signal.SIGKILL)
        for i in range(a.accum):
            ids = torch.randint(0, a.vocab, (a.micro, a.seq), generator=tokens)
            masked = torch.rand((a.micro, a.seq), generator=tokens) < 0.15
            if i < a.accum - 1:
                with ddp.no_sync():
                    ddp(ids, masked, ids[masked]).backward()
            else:
                loss = ddp(ids, masked, ids[masked])
                loss.backward()
        correct = correct and math.isfinite(loss.item())
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        step += 1
        if rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                       checkpoint + ".tmp")
            os.replace(checkpoint + ".tmp", checkpoint)
            event(events, event="window", step=step, restart=restart)
    if rank == 0:
        result = summary(events, a, world)
        result["correct"] = correct
        with open(os.path.join(a.dir, "result.json"), "w") as f:
            f.write(json.dumps(result) + "\n")
    dist.barrier()
    os._exit(0)  # torch 1.13 can deadlock tearing down gloo at exit (see ddp_bert.py)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        print(f"elastic_ddp_bert: {e}", file=sys.stderr)
        sys.exit(1)
