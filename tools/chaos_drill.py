"""The failover drill of tools/chaos (`--schedule`): faults on the head and on etcd whose outcome
is known before they are injected, each checked against it after the job (issue 55 §2;
docs/faults.md#the-failover-drill).

Which side of a partition goes on is etcd's to say: the side that holds a majority of its
members can renew (or take) the head's lease, so it keeps or takes the role and loses the other
side's nodes; the other side's nodes can write nothing, hear no head, and stop. Each fault below
records `expect_lost` (the nodes the job must lose; no others but those in `may_lose`, where the
outcome rests on a race the drill does not control) and `expect_head_moves`:

  freeze_head            the head's process stopped (SIGSTOP), woken after the fault's length: its
                         electors vote it silent and one takes the role; woken, it finds its lease
                         gone, stops, and is restarted as a worker
  cut_head               the head's host's link down (carrier lost): the head fences itself, its
                         electors vote it silent, one takes the role
  drop_head              the head's host drops every packet, its link up (no carrier lost): the
                         head's lease lapses, it stops within it, another node takes the role
  partition_head         {the head's host} | {every other}: the same, though each side still
                         reaches the launcher and the rest of the world
  partition_head_one     {the head's host, one other} | {the rest}, the other chosen so the
                         head's side holds etcd's majority when the head's host has a member:
                         the head's side goes on and loses the rest; else the rest goes on, the
                         role moves, and the head's companion is lost too when the new head
                         forms its generation while the cut holds (`may_lose`: either is right)
  split_etcd             etcd's leader cut from its peers (port 2380 only; troupe's own traffic
                         flows): etcd elects another leader; the job loses no one, the head stays
  kill_etcd_leader_host  the host of etcd's leader dies: its link down, its etcd member and its
                         node killed; that node is lost, and the role moves when it was the head's
  kill_head_etcd_leader  the same on the head's host, etcd's leadership moved there first (etcd's
                         own transfer): the worst case, the survivors' votes waiting for etcd to
                         elect a leader before the role can move (needs an etcd member on the
                         head's host: first in a schedule, the head is on the first host)
  kill_head_and_one      two faults at once, as a rack's power would take two machines: the
                         head's process and a worker's SIGKILLed in the same instant; both are
                         lost, the role moves (a survivor may race the dead worker for it)
  cut_head_and_one       the head's host's link and another host's down at once (a rack's switch),
                         the other chosen so that etcd keeps its majority: both are lost, the head
                         fences itself before the role moves
  reset_control          a worker host's TCP connections to the head's port reset (ss -K) while
                         every datagram flows: the node reconnects, no one is lost, the role stays
                         (docs/faults.md#a-control-connection-that-breaks)

Each lasts DURATION_S and is then undone (the host healed, the member started on its data);
the launcher restarts the nodes that ended, and the next fault comes once every node trains again.
"""
import json
import os
import signal
import time
import urllib.request

from bench_across_hosts import node_processes
from chaos_faults import fault_target_missing

KINDS = ("freeze_head", "cut_head", "split_etcd", "kill_etcd_leader_host", "kill_head_etcd_leader", "drop_head", "partition_head",
         "partition_head_one", "reset_control", "kill_head_and_one", "cut_head_and_one")
DURATION_S = {"freeze_head": 8, "cut_head": 8, "drop_head": 8, "partition_head": 8, "partition_head_one": 8, "split_etcd": 10,
              "kill_etcd_leader_host": 10, "kill_head_etcd_leader": 10, "reset_control": 0, "kill_head_and_one": 0,
              "cut_head_and_one": 8}
TWO_AT_ONCE = ("kill_head_and_one", "cut_head_and_one")  # the head's node and another's together
LEADER_MOVE_S = 10  # how long etcd may take to hand its leadership over
HEAD_PORT = 29500  # netcluster's manifest's head.port: every head's, the role moving or not
ETCD_PEER_PORT = 2380
# Events counted as a fault's outcome: from a second before its start (the clock is read just
# before the injection) until this long after it is undone, and never past the next fault.
OUTCOME_AFTER_S = 20


def etcd_status(address):
    """etcd's /v3/maintenance/status from the member at ADDRESS: (its id, its leader's id), or None."""
    request = urllib.request.Request(f"http://{address}:2379/v3/maintenance/status", data=b"{}",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=1) as answer:
            status = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    return status["header"]["member_id"], status.get("leader")


def etcd_leader(faults):
    """The host whose etcd member leads now (as a member that answers says)."""
    ids, leader = {}, None
    for host in faults.etcd_members:
        status = etcd_status(faults.address[host])
        if status:
            ids[status[0]] = host
            leader = leader or status[1]
    if leader not in ids:
        raise fault_target_missing(f"no etcd member names a leader it can be matched with ({leader})")
    return ids[leader]


def move_etcd_leader(faults, host):
    """Makes HOST's etcd member the leader (etcd's MoveLeader, asked of the leader), and waits until
    the members say so."""
    leader = etcd_leader(faults)
    if leader == host:
        return
    target = etcd_status(faults.address[host])
    if not target:
        raise fault_target_missing(f"the etcd member on {host} does not answer")
    request = urllib.request.Request(f"http://{faults.address[leader]}:2379/v3/maintenance/transfer-leadership",
                                     data=json.dumps({"targetID": target[0]}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=LEADER_MOVE_S):
        pass
    deadline = time.monotonic() + LEADER_MOVE_S
    while etcd_leader(faults) != host:
        if time.monotonic() > deadline:
            raise fault_target_missing(f"etcd's leadership did not move to {host} within {LEADER_MOVE_S} s")
        time.sleep(0.1)


def kill_host_with_etcd_member(faults, host):
    """HOST dies: its link cut, its etcd member and its node killed (undone: healed, member started)."""
    pid = node_processes(faults.run_dir).get(host)
    if not pid:
        raise fault_target_missing(f"no node process runs on {host}")
    faults.undo_with(lambda: (faults.netcluster("heal", host), faults.netcluster("etcd", "start", host)))
    faults.netcluster("cut", host)
    faults.netcluster("etcd", "kill", host)
    os.kill(pid, signal.SIGKILL)


def head_host(faults):
    head = faults.head_of()
    if head not in faults.hosts:
        raise fault_target_missing(f"the head {head} is not on one of the cluster's hosts")
    return head


def majority(side, members):
    return 2 * len(set(side) & set(members)) > len(members)


def cut_pairs(faults, side, other, *port):
    # The undo first: a cut that fails halfway leaves none of the others in place. One command
    # per host of SIDE cuts it from all of OTHER at once.
    faults.undo_with(lambda: [faults.netcluster("heal", host) for host in side])
    for host in side:
        faults.netcluster("cut", host, *other, *port)


def head_and_one(faults, kind, head):
    """The two-at-once faults: the head's node and one other's, killed or cut off together."""
    if kind == "kill_head_and_one":
        _, head_pid = faults.head_process()
        other, other_pid = faults.worker_process()
        os.kill(head_pid, signal.SIGKILL)
        os.kill(other_pid, signal.SIGKILL)
    else:  # cut_head_and_one: never two etcd members of three
        others = [h for h in faults.hosts if h != head and not (head in faults.etcd_members and h in faults.etcd_members)]
        other = faults.rng.choice(others)
        faults.undo_with(lambda: [faults.netcluster("heal", h) for h in (head, other)])
        faults.netcluster("cut", head)
        faults.netcluster("cut", other)
    return {"host": head, "other": other, "expect_lost": sorted([head, other]), "expect_head_moves": True}


def inject(faults, kind):
    """Injects the drill fault KIND through FAULTS (chaos_faults.cluster_faults); what it hit and
    what the job must do about it."""
    head = head_host(faults)
    if kind in TWO_AT_ONCE:
        return head_and_one(faults, kind, head)
    if kind == "freeze_head":
        _, pid = faults.head_process()
        faults.undo_with(lambda: faults.wake(pid))
        os.kill(pid, signal.SIGSTOP)
        return {"host": head, "expect_lost": [head], "expect_head_moves": True}
    if kind == "cut_head":
        faults.undo_with(lambda: faults.netcluster("heal", head))
        faults.netcluster("cut", head)
        return {"host": head, "expect_lost": [head], "expect_head_moves": True}
    if kind == "drop_head":
        faults.undo_with(lambda: faults.netcluster("heal", head))
        faults.netcluster("cut", head, "--drop")
        return {"host": head, "expect_lost": [head], "expect_head_moves": True}
    if kind == "partition_head":
        cut_pairs(faults, [head], [h for h in faults.hosts if h != head])
        return {"host": head, "expect_lost": [head], "expect_head_moves": True}
    if kind == "partition_head_one":
        others = [h for h in faults.hosts if h != head]
        members_first = [h for h in others if h in faults.etcd_members] + [h for h in others if h not in faults.etcd_members]
        side = [head, members_first[0]]
        rest = [h for h in faults.hosts if h not in side]
        cut_pairs(faults, side, rest)
        # The head's side with etcd's majority loses the rest (their heartbeats fall silent at the
        # head). Without it the head stops, and its companion, which loses nothing but the head,
        # searches etcd for the role for 2 lease_s + 5 s. The other side's new head drops a member
        # it never hears from heartbeat_ms after its takeover, as any silent one, unless another
        # member's probe reaches it: the companion is lost when the role moves (by the electors'
        # votes) with more than heartbeat_ms of the cut (8 s) left, and joins the new head's
        # generation when the role waits for the lease (the companion one of too few electors).
        if majority(side, faults.etcd_members):
            return {"host": head, "side": side, "rest": rest, "expect_lost": sorted(rest), "expect_head_moves": False}
        return {"host": head, "side": side, "rest": rest, "expect_lost": [head], "may_lose": [side[1]],
                "expect_head_moves": True}
    if kind == "reset_control":
        workers = sorted(n for n in node_processes(faults.run_dir) if n != head and n in faults.hosts)
        if not workers:
            raise fault_target_missing("no worker node runs")
        host = faults.rng.choice(workers)
        faults.netcluster("reset", host, "--port", HEAD_PORT)
        return {"host": host, "expect_lost": [], "expect_head_moves": False, "expect_reconnected": [host]}
    if kind == "kill_head_etcd_leader":
        if head not in faults.etcd_members:
            raise fault_target_missing(f"the head's host {head} has no etcd member")
        move_etcd_leader(faults, head)
        kill_host_with_etcd_member(faults, head)
        return {"host": head, "expect_lost": [head], "expect_head_moves": True}
    leader = etcd_leader(faults)
    if kind == "split_etcd":
        cut_pairs(faults, [leader], [h for h in faults.etcd_members if h != leader], "--port", ETCD_PEER_PORT)
        return {"host": leader, "expect_lost": [], "expect_head_moves": False}
    if kind == "kill_etcd_leader_host":
        kill_host_with_etcd_member(faults, leader)
        return {"host": leader, "expect_lost": [leader], "expect_head_moves": leader == head}
    raise ValueError(f"not a drill fault: {kind}")


def outcome(events, fault, until):
    """What the job did about FAULT: the nodes it lost, and the seconds after the injection was
    all in place (a partition takes a netcluster command per side; the head's lookup and etcd's
    leader's come first) that the role moved, that the old head fenced itself (None where it
    did not; before the end of a partition's injection, negative), and that the generation the
    job decided on formed (its plan sent: the next window training)."""
    begin, end = fault["unix_s"] - 1, min(until, fault["healed_unix_s"] + OUTCOME_AFTER_S)
    inside = [e for e in events if begin <= e.get("unix_s", 0) < end]
    origin = fault.get("injected_unix_s", fault["unix_s"])

    def first(kind, since=begin, **fields):
        at = [e["unix_s"] for e in inside
              if e.get("event") == kind and e["unix_s"] >= since and all(e.get(k) == v for k, v in fields.items())]
        return at[0] if at else None

    def after_injection(at):
        return None if at is None else round(at - origin, 3)

    decided = min((e["unix_s"] for e in inside if e.get("event") in ("head_moved", "node_lost")), default=None)
    return {"lost": sorted({e["node"] for e in inside if e.get("event") == "node_lost"}),
            "reconnected": sorted({e["node"] for e in inside if e.get("event") == "control_reconnected"}),
            "head_moved_s": after_injection(first("head_moved")),
            "head_fenced_s": after_injection(first("head_fenced", node=fault.get("host", fault.get("node")))),
            "generation_s": after_injection(decided and first("generation", since=decided)),
            "inject_s": round(origin - fault["unix_s"], 3)}


def judge(events, faults):
    """Each fault's outcome (added to it as "outcome"), a drill fault's beside what it expected;
    the failures, in words. Timings are reported, not judged; the one order that is judged is the
    safety rule's: a cut-off head stops before another node takes its role."""
    failures = []
    for index, fault in enumerate(faults):
        until = faults[index + 1]["unix_s"] if index + 1 < len(faults) else float("inf")
        seen = fault["outcome"] = outcome(events, fault, until)
        if "expect_lost" not in fault:
            continue
        what = f"{fault['kind']} on {fault['host']}"
        moved = seen["head_moved_s"] is not None
        if not set(fault["expect_lost"]) <= set(seen["lost"]) <= set(fault["expect_lost"] + fault.get("may_lose", [])):
            maybe = f" (and perhaps {fault['may_lose']})" if fault.get("may_lose") else ""
            failures.append(f"{what}: the job lost {seen['lost'] or 'no one'}, expected {fault['expect_lost'] or 'no one'}{maybe}")
        if "expect_reconnected" in fault and seen["reconnected"] != fault["expect_reconnected"]:
            failures.append(f"{what}: {seen['reconnected'] or 'no node'} reconnected, expected {fault['expect_reconnected']}")
        if moved != fault["expect_head_moves"]:
            failures.append(f"{what}: the head's role {'moved' if moved else 'stayed'}, expected it to "
                            f"{'move' if fault['expect_head_moves'] else 'stay'}")
        cut_off_head = fault["kind"] in ("cut_head", "drop_head", "partition_head", "cut_head_and_one") or (
            fault["kind"] == "partition_head_one" and fault["expect_head_moves"])
        if cut_off_head and moved and (seen["head_fenced_s"] is None or seen["head_fenced_s"] >= seen["head_moved_s"]):
            failures.append(f"{what}: the cut-off head fenced itself at {seen['head_fenced_s']} s, not before another "
                            f"node took its role ({seen['head_moved_s']} s after the cut)")
    return failures
