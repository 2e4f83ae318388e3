"""Peer benchmark: PyTorch torch.distributed allreduce over gloo (CPU), float sum.

  /usr/bin/python3 gloo_allreduce.py [--world 2] [--bytes 4K,64K,1M,4M,16M,64M] [--iters N] [--in-place]
  /usr/bin/python3 gloo_allreduce.py --rank R --master ADDR --port P --world N ...   (one rank per host)

One process per rank (torch.multiprocessing), rendezvous on 127.0.0.1 at a port the OS hands
out, one intra-op thread per process; or, with --rank, this process is rank R alone and meets
the others at ADDR:P (rank 0's host), as torchrun's ranks do across hosts (set
GLOO_SOCKET_IFNAME to the interface the ranks share). gloo's all_reduce works in place, so by default a call is
measured out of place, as MPI_Allreduce(sendbuf, recvbuf): the input tensor is copied into the
output tensor and the output tensor reduced, the copy inside the timed region (it is what an
out-of-place sum costs with gloo). --in-place times all_reduce alone on the output tensor, after
an untimed copy of the input into it.

What is timed: per size, 3 warm-up calls, a barrier, then N calls (default 100 below 16 MiB, 10
from 16 MiB), each timed on its own; a rank's time per call is the sum of its timed calls / N and
the reported time is the slowest rank's (all_reduce MAX), as nccl-tests. algbw = bytes / time,
busbw = algbw * 2(n-1)/n.

How it checks itself: element i of rank r's input holds (r+1) + ((i+phase) % 7), small integers,
so the sum is exact and must equal n(n+1)/2 + n*((i+phase) % 7). Calls alternate between two
inputs (phase 0 and 1) whose sums differ in every element, so a stale output fails too. Every
call's output (warm-up included) is compared with the closed form after its clock stopped;
wrong elements are counted over calls and ranks (nccl-tests' #wrong). Any wrong element makes
"correct" false and the exit status 1.

Prints one JSON line: {"peer":"gloo","world":N,"results":[{"bytes",..,"time_us","algbw_GBs","busbw_GBs","wrong"}],"correct":..}
Needs Debian's python3-torch (apt-get install python3-torch).
"""
import argparse, json, os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from free_port import free_port


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def pattern(count, rank, world, phase):
    """(input of this rank, expected sum) for one phase."""
    j = (torch.arange(count, dtype=torch.int64) + phase) % 7
    return (j + rank + 1).float(), (j * world + world * (world + 1) // 2).float()


def run(rank, a):
    os.environ.update(MASTER_ADDR=a.master, MASTER_PORT=str(a.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    results, correct = [], True
    for nbytes in a.bytes:
        count = nbytes // 4
        inputs, expected = zip(*(pattern(count, rank, a.world, phase) for phase in (0, 1)))
        out = torch.zeros(count)
        iters = a.iters or (10 if nbytes >= 1 << 24 else 100)
        wrong = 0

        def call(k):  # seconds of one call
            if a.in_place:
                out.copy_(inputs[k % 2])
            t0 = time.perf_counter()
            if not a.in_place:
                out.copy_(inputs[k % 2])
            dist.all_reduce(out)
            return time.perf_counter() - t0

        for k in range(3):
            call(k)
            wrong += int((out != expected[k % 2]).sum())
        dist.barrier()
        timed = 0.0
        for k in range(iters):
            timed += call(k)
            wrong += int((out != expected[k % 2]).sum())
        stats = torch.tensor([timed / iters], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        wrong_all = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(wrong_all)
        t, wrong = stats.item(), int(wrong_all.item())
        correct = correct and wrong == 0
        algbw = nbytes / t / 1e9
        results.append({"bytes": nbytes, "time_us": round(t * 1e6, 2), "algbw_GBs": round(algbw, 4),
                        "busbw_GBs": round(algbw * 2 * (a.world - 1) / a.world, 4), "iterations": iters,
                        "wrong": wrong})
    if rank == 0:
        print(json.dumps({"peer": "gloo", "torch": torch.__version__, "world": a.world,
                          "out_of_place": not a.in_place, "results": results, "correct": correct}), flush=True)
    dist.destroy_process_group()
    if not correct:
        sys.exit(1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--bytes", default="4K,64K,1M,4M,16M,64M")
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--in-place", action="store_true")
    p.add_argument("--rank", type=int, default=None, help="run only this rank (one process per host)")
    p.add_argument("--master", default="127.0.0.1", help="rank 0's address (with --rank)")
    p.add_argument("--port", type=int, default=0, help="rank 0's rendezvous port (with --rank)")
    a = p.parse_args()
    a.bytes = [parse_bytes(b) for b in a.bytes.split(",")]
    if a.rank is not None:
        if not a.port:
            sys.exit("gloo_allreduce: --rank needs --port (and --master)")
        run(a.rank, a)
        sys.exit(0)
    a.port = free_port()
    try:
        mp.spawn(run, args=(a,), nprocs=a.world)
    except Exception as e:  # a rank exited non-zero (wrong result) or failed
        print(f"gloo_allreduce: {e}", file=sys.stderr)
        sys.exit(1)
