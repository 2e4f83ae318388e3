"""Whether a chaos run (tools/chaos) trained the model a fault-free run would have: its losses
and final parameters against a reference over the same samples (the elastic contract, issue 55;
docs/faults.md#chaos-soak).

The reference is, when it can be,
  the replay    a fault-free run of local nodes on the same worlds (as many workers as the run
                had nodes, stretch by stretch, each resumed from the last one's checkpoint).
                Ranks, rings and the split of each window follow the world alone, and a worker
                sizes OpenBLAS's thread pool from its config (compute/intra_op_threads.hpp), so
                the two sum and multiply in the same order: equal, bit for bit (before the thread
                pools followed the config, the two differed from the second window on, by up to
                2e-7 over an hour). A window lost, skipped or applied twice moves the parameters
                by an optimizer step (~1e-3 here) and the losses by far more than the bounds.
and otherwise (a world the global batch does not split evenly, which a fresh launch refuses:
the hosts beyond 6 of a scale run, where no batch of a sensible size splits over both N and N - 1)
  one process   `troupe train` of the same config for as many windows: the same samples and
                dropout (both keyed by sample: compute/sample_order.hpp), summed in another
                order, so equal to rounding: within the issue's 1e-4 relative per step.
"""
import json
import socket
import subprocess

from bench_across_hosts import json_lines, run
from chaos_goodput import kept_windows

BOUNDS = {  # (largest relative loss difference per step, largest |a - b| over the final parameters)
    "replay": (1e-5, 1e-4),
    "one process": (1e-4, 1e-3),
}


def same_model(troupe, config, run_dir, scratch, first_world, last_step):
    """The run in RUN_DIR against its reference (above): {reference, worlds, steps_compared,
    max_rel_loss_diff, parameters_max_abs_diff, optimizer_max_abs_diff, diff_error}."""
    schedule = world_schedule(run_dir, first_world, last_step)
    c = json.loads(config.read_text())
    per_world = c["train_batch_size"] // c["train_micro_batch_size_per_gpu"]
    if all(per_world % world == 0 for _, _, world in schedule):
        return dict(reference="replay", **replay_model(troupe, config, run_dir, scratch, schedule))
    reference = scratch / "one-process"
    run(troupe, "train", "--config", config, "--run-dir", reference, "--steps", last_step)
    return dict(reference="one process", worlds=schedule, **compare(troupe, run_dir, reference))


def model_failures(model):
    """What --check fails on in the model's comparison, in words."""
    loss_bound, parameter_bound = BOUNDS.get(model.get("reference"), BOUNDS["replay"])
    failed = []
    if model.get("max_rel_loss_diff") is None or model["max_rel_loss_diff"] > loss_bound:
        failed.append(f"losses differ from the fault-free {model.get('reference')}'s: {model.get('max_rel_loss_diff')} "
                      f"(bound {loss_bound})")
    if model.get("parameters_max_abs_diff") is None or model["parameters_max_abs_diff"] > parameter_bound:
        failed.append(f"final parameters differ: {model.get('parameters_max_abs_diff')} (bound {parameter_bound}) "
                      f"{model.get('diff_error') or ''}")
    return failed


def world_schedule(run_dir, first_world, last_step):
    """[(from_step, to_step, world)]: the worlds the soak's windows ran on, from its generation
    events (generation g trains the windows after its start_steps), neighbours of one world merged."""
    starts = [(0, first_world)] + [(e["start_steps"], len(e["nodes"])) for e in json_lines(run_dir / "events.jsonl")
                                   if e.get("event") == "generation"]
    segments = []
    for index, (start, world) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else last_step
        if end <= start:
            continue  # replaced before it finished a window
        if segments and segments[-1][2] == world:
            segments[-1] = (segments[-1][0], end, world)
        else:
            segments.append((start, end, world))
    return segments


def local_manifest(scratch, world):
    """One node of WORLD workers on this host: ranks numbered as the soak's (node order), the same
    rings and shares (they follow the world alone), so the same bits as WORLD single-worker nodes,
    in a quarter less time (one process: 0.78 s a window against 1.01 s for five)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    m = {"head": {"host": "127.0.0.1", "port": port}, "rings": {"count": 2}, "oversubscribe": True,
         "timeouts": {"join_s": 120},
         "nodes": [{"name": "replay", "host": "127.0.0.1", "workers": world, "threads_per_worker": 1}]}
    path = scratch / f"replay-{world}.json"
    path.write_text(json.dumps(m))
    return path


def replay_model(troupe, config, run_dir, scratch, schedule):
    """The run against a fault-free replay on the same worlds (above): a local node of as many
    workers as the run had nodes in each stretch of steps, each stretch resumed from the last
    one's checkpoint (exact)."""
    replay = scratch / "replay"
    for index, (_, end, world) in enumerate(schedule):
        run(troupe, "launch", "--manifest", local_manifest(scratch, world), "--config", config, "--run-dir", replay,
            "--steps", end, *(["--resume", "latest"] if index > 0 else []))
    return dict(worlds=schedule, **compare(troupe, run_dir, replay))


def compare(troupe, run_dir, reference):
    """The largest relative loss difference over the steps both runs wrote, and the largest
    |a - b| of their final checkpoints' parameters and optimizer state (`troupe ckpt diff`)."""
    ours = {w["step"]: w["loss"] for w in kept_windows(json_lines(run_dir / "metrics.jsonl"))}
    theirs = {w["step"]: w["loss"] for w in kept_windows(json_lines(reference / "metrics.jsonl"))}
    common = sorted(set(ours) & set(theirs))
    loss_diff = max((abs(ours[s] - theirs[s]) / max(abs(theirs[s]), 1e-12) for s in common), default=None)
    diff = subprocess.run([str(troupe), "ckpt", "diff", str(run_dir), str(reference)], capture_output=True, text=True)
    tensors = [json.loads(line) for line in diff.stdout.splitlines() if line.startswith("{")]

    def largest(section):
        return max((t["max_abs_diff"] for t in tensors if t.get("section") == section and t.get("max_abs_diff") is not None),
                   default=None)

    return {"steps_compared": len(common), "max_rel_loss_diff": loss_diff,
            "parameters_max_abs_diff": largest("model"), "optimizer_max_abs_diff": largest("optimizer"),
            "diff_error": diff.stderr.strip()[-400:] if diff.returncode != 0 else None}
