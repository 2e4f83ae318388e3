"""Where a chaos soak's time went (tools/chaos), in the vocabulary of Google's ML goodput: the
run's metrics.jsonl and events.jsonl and the faults tools/chaos injected, read after the job.

A window ends when its gradient sum does (the latest rank's last receive). The wall time runs
from the start of the first window to the end of the last, and splits into one span per kept
window (the last line of each step): from the previous window's end to its own. A span in which
no generation formed is the window's own time:
  productive   less the time it stood still for a checkpoint
  checkpoint   that stall
A span in which a generation formed (`generation` in events.jsonl) held the window that was
abandoned and the window redone on the new world; the redone one, from the generation to the
span's end, is productive, and what came before it is badput. When a node was lost in the span
(`node_lost`, or the head's role moving: `head_moved`) it splits into
  window work lost  from the span's start to the fault: work on the window then abandoned
  detection         from the fault (or the span's start, when the fault came earlier and
                    windows went on meanwhile) to the job's decision
  new generation    from the decision to the generation (the plan, the new rings)
and when a restarted node joined (`node_restarted`) it is
  rejoin            its admission: the members stop their window for the newcomer
and otherwise
  other
The replica copy a generation starts with lies in its first window, counted productive (three
allreduces of the parameters: milliseconds for this model).
"""
import pathlib

from bench_across_hosts import json_lines
from chaos_drill import OUTCOME_AFTER_S

DECISIONS = ("node_lost", "head_moved")
KILLING = ("kill", "kill_head", "freeze", "cut_host")  # faults whose target may rightly be lost


def kept_windows(metrics):
    """The last line of each step, in step order."""
    by_step = {}
    for line in metrics:
        if "step" in line and "window_s" in line:
            by_step[line["step"]] = line
    return [by_step[step] for step in sorted(by_step)]


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def sum_started(line):
    """When the window's gradient sum started (the earliest rank's first send; unix s)."""
    posted = [t for rank in line.get("ranks", []) for t in rank.get("ring_send_posted_unix", []) if t > 0]
    return min(posted) if posted else line["unix_s"] - line["window_s"]


def window_end(line):
    """When the window's gradient sum ended (the latest rank's last receive; unix s): the line's
    unix_s is when the first report reached the hub, which a node's metrics batching delays."""
    done = [t for rank in line.get("ranks", []) for t in rank.get("ring_receive_done_unix", []) if t > 0]
    return max(done) if done else line["unix_s"]


def split_spans(windows, events, faults):
    """Seconds of productive time and of each badput cause, span by span (see above)."""
    seconds = dict.fromkeys(("productive", "checkpoint", "window_work_lost", "detection", "new_generation", "rejoin",
                             "other"), 0.0)
    begin = window_end(windows[0]) - windows[0]["window_s"]
    for window in windows:
        end = window_end(window)
        inside = [e for e in events if begin < e.get("unix_s", 0) <= end]
        generations = [e["unix_s"] for e in inside if e.get("event") == "generation"]
        stall = window.get("checkpoint_stall_s", 0.0)
        if not generations:
            seconds["productive"] += end - begin - stall
            seconds["checkpoint"] += stall
            begin = end
            continue
        formed = generations[-1]
        seconds["productive"] += end - formed
        decision = next((e["unix_s"] for e in inside if e.get("event") in DECISIONS), None)
        if decision is not None and decision <= formed:
            fault = max([f["unix_s"] for f in faults if f["unix_s"] <= decision] or [begin])
            fault = max(fault, begin)
            seconds["window_work_lost"] += fault - begin
            seconds["detection"] += decision - fault
            seconds["new_generation"] += formed - decision
        elif any(e.get("event") == "node_restarted" for e in inside):
            seconds["rejoin"] += formed - begin
        else:
            seconds["other"] += formed - begin
        begin = end
    return seconds


def recoveries(windows, events, faults):
    """Per fault: seconds to the job's decision (one before the next fault, which it would
    otherwise be charged with), and to the end of the first window whose sum started after the
    fault (None when no window followed)."""
    out = []
    for index, fault in enumerate(faults):
        next_fault = faults[index + 1]["unix_s"] if index + 1 < len(faults) else float("inf")
        until = min(fault["unix_s"] + fault["seconds"] + 30, next_fault)
        decided = next((e["unix_s"] for e in events
                        if e.get("event") in DECISIONS and fault["unix_s"] <= e.get("unix_s", 0) < until), None)
        first = next((w for w in windows if sum_started(w) > fault["unix_s"]), None)
        out.append({"detect_s": decided and round(decided - fault["unix_s"], 3),
                    "recover_s": first and round(window_end(first) - fault["unix_s"], 3)})
    return out


def explains(fault, lost):
    """Whether FAULT explains the node_lost event LOST: a drill fault (tools/chaos_drill.py) the
    nodes it expected lost (or allowed), within the span its outcome is judged over; any other the node it
    killed, froze or cut off, or either end of a cut link, up to 15 s after it ended."""
    if "expect_lost" in fault:
        return (fault["unix_s"] - 1 <= lost["unix_s"] <= fault["healed_unix_s"] + OUTCOME_AFTER_S
                and lost.get("node") in fault["expect_lost"] + fault.get("may_lose", []))
    hit = lost.get("node") in (fault.get("node"), fault.get("host"), fault.get("peer")) or fault["kind"] == "kill_head"
    return (fault["unix_s"] - 1 <= lost["unix_s"] <= fault["unix_s"] + fault["seconds"] + 15 and hit
            and (fault["kind"] in KILLING or fault["kind"] == "cut_link"))


def false_deaths(events, faults):
    """node_lost events that no fault explains: a node lost though nothing killed, froze or cut
    it off (a cut link's pair rule drops one of its two ends, by design: not false). A drill
    fault (tools/chaos_drill.py) explains exactly the nodes it expected lost."""
    false = []
    for lost in (e for e in events if e.get("event") == "node_lost"):
        explained = any(explains(f, lost) for f in faults)
        if not explained:
            false.append({"node": lost.get("node"), "unix_s": lost["unix_s"], "reason": lost.get("reason")})
    return false


def committed_windows_lost(metrics, events):
    """Windows the job had finished (their line written) that a later generation started before."""
    lost = 0
    for generation in (e for e in events if e.get("event") == "generation"):
        written = [m["step"] for m in metrics if "step" in m and m.get("unix_s", 0) < generation["unix_s"]]
        if written:
            lost += max(0, max(written) - generation.get("start_steps", 0))
    return lost


def goodput(run_dir, faults):
    """The soak's report (a dict) from RUN_DIR and the injected FAULTS."""
    run_dir = pathlib.Path(run_dir)
    metrics = json_lines(run_dir / "metrics.jsonl")
    events = sorted(json_lines(run_dir / "events.jsonl"), key=lambda e: e.get("unix_s", 0))
    windows = kept_windows(metrics)
    if len(windows) < 2:
        return {"error": f"{run_dir}/metrics.jsonl has {len(windows)} windows"}
    wall = window_end(windows[-1]) - (window_end(windows[0]) - windows[0]["window_s"])
    badput = split_spans(windows, events, faults)
    productive = badput.pop("productive")
    recovered = recoveries(windows, events, faults)
    recover_s = [r["recover_s"] for r, f in zip(recovered, faults) if r["detect_s"] is not None and r["recover_s"]]
    steps = [w["step"] for w in windows]
    return {
        "wall_s": round(wall, 2), "productive_s": round(productive, 2), "goodput": round(productive / wall, 4),
        "badput_s": {cause: round(seconds, 2) for cause, seconds in badput.items()},
        "windows": len(windows), "first_step": steps[0], "last_step": steps[-1],
        "steps_missing": sorted(set(range(steps[0], steps[-1] + 1)) - set(steps)),
        "faults": [dict(f, **r) for f, r in zip(faults, recovered)],
        "recovery_s": {"count": len(recover_s), "p50": percentile(recover_s, 50), "p99": percentile(recover_s, 99)},
        "false_deaths": false_deaths(events, faults),
        "committed_windows_lost": committed_windows_lost(metrics, events),
        "generations": sum(1 for e in events if e.get("event") == "generation"),
        "head_moves": sum(1 for e in events if e.get("event") == "head_moved"),
        "restarts": sum(1 for e in events if e.get("event") == "node_restarted"),
    }
