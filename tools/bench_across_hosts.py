"""What the benchmarks across tools/netcluster hosts share (tools/bench-overlap,
tools/bench-scaling-across-hosts, tools/bench-startup-across-hosts,
tools/bench-straggler-across-hosts): the cluster, a launch manifest for its first hosts, a job
config sized for them, `troupe bench train` on them, the PyTorch DDP peer (tools/peers/ddp_bert.py)
with one rank per host, and readers of a launched job's processes and run directory. Root:
netcluster makes network namespaces."""
import json, os, pathlib, subprocess, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NETCLUSTER = ROOT / "tools" / "netcluster"
TROUPE = ROOT / "build" / "tools" / "troupe"


def run(*args, capture=True):
    result = subprocess.run([str(a) for a in args], check=True, text=True,
                            stdout=subprocess.PIPE if capture else None)
    return result.stdout


def netcluster(name, *args):
    """tools/netcluster ARGS --name NAME; its JSON answer, if it printed one."""
    out = run(NETCLUSTER, *args, "--name", name)
    return json.loads(out) if out.strip().startswith("{") else None


def need_troupe(script):
    if not TROUPE.exists():
        sys.exit(f"{script}: {TROUPE} is missing; build it first (tools/build)")
    return TROUPE


def ensure_torch():
    """Debian's python3-torch, which the DDP peer runs on."""
    if subprocess.run(["dpkg-query", "-W", "-f=${Status}", "python3-torch"], capture_output=True,
                      text=True).stdout.find("install ok installed") < 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "python3-torch"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def manifest_for(cluster, hosts, scratch):
    """The cluster's manifest cut to its first HOSTS nodes, one worker of one thread each, two
    rings (each with its own TCP connections)."""
    m = json.loads(pathlib.Path(cluster["manifest"]).read_text())
    m["nodes"] = [dict(node, workers=1, threads_per_worker=1) for node in m["nodes"][:hosts]]
    m.update(rings={"count": 2, "order": "auto"}, oversubscribe=True,
             timeouts={"join_s": 60, "collective_s": 300, "window_s": 900, "heartbeat_ms": 10000})
    path = scratch / f"manifest-{hosts}.json"
    path.write_text(json.dumps(m, indent=2))
    return path


def config_for(base, scratch, hosts, name, **settings):
    """The job config BASE for HOSTS hosts: each keeps the config's micro-batch and accumulation
    (as the DDP peer's ranks do), so the global batch grows with the hosts; no TensorBoard.
    SETTINGS replace top-level keys; zero_optimization is merged into the config's own."""
    c = json.loads(pathlib.Path(base).read_text())
    c["train_batch_size"] = c["train_micro_batch_size_per_gpu"] * c.get("gradient_accumulation_steps", 1) * hosts
    c["tensorboard"] = {"enabled": False}
    for key, value in settings.items():
        c[key] = dict(c.get(key, {}), **value) if key == "zero_optimization" else value
    path = scratch / f"config-{name}-{hosts}.json"
    path.write_text(json.dumps(c, indent=2))
    return path


def bench_train(troupe, config, manifest, steps, time_split=False):
    """`troupe bench train --synthetic` as a job on the manifest's hosts: its JSON record."""
    out = run(troupe, "bench", "train", "--config", config, "--synthetic", "--steps", steps, "--manifest", manifest,
              *(["--time-split"] if time_split else []), "--json")
    return json.loads(out.strip().splitlines()[-1])


def ddp_across(name, cluster, hosts, config, steps, compress="none", script="bench"):
    """The DDP peer (gloo, no_sync over the accumulation), one rank per host on the first HOSTS
    hosts, the model and per-rank batch of CONFIG (bert-mini shapes): rank 0's JSON record."""
    c = json.loads(pathlib.Path(config).read_text())
    micro, accum = c["train_micro_batch_size_per_gpu"], c.get("gradient_accumulation_steps", 1)
    members = cluster["hosts"][:hosts]
    args = ["--world", hosts, "--master", members[0]["address"], "--port", 29555, "--bf16", int(c["bf16"]["enabled"]),
            "--micro", micro, "--accum", accum, "--steps", steps, "--threads", 1,
            "--layers", c["model"]["num_hidden_layers"], "--hidden", c["model"]["hidden_size"],
            "--heads", c["model"]["num_attention_heads"], "--compress", compress]
    ranks = [subprocess.Popen([str(NETCLUSTER), "exec", "--name", name, host["name"], "--", "env", "OPENBLAS_NUM_THREADS=1",
                               "GLOO_SOCKET_IFNAME=eth0", "/usr/bin/python3", str(ROOT / "tools" / "peers" / "ddp_bert.py"),
                               "--rank", str(rank), *map(str, args)], stdout=subprocess.PIPE, text=True)
             for rank, host in enumerate(members)]
    outputs = [rank.communicate(timeout=1800)[0] for rank in ranks]
    if any(rank.returncode != 0 for rank in ranks):
        sys.exit(f"{script}: the DDP peer failed: {outputs}")
    return json.loads(outputs[0].strip().splitlines()[-1])


def launch_files(scratch, cluster, hosts, steps, data):
    """For `troupe launch` on the cluster's first HOSTS hosts: the job config (bert-tiny shapes,
    dropout on, fp32, a global batch of 2 per host, STEPS windows) and the manifest (one node of
    one worker and one thread per host, two rings, default timeouts but a long join)."""
    c = json.loads((ROOT / "configs" / "bert-tiny.json").read_text())
    c.pop("gradient_accumulation_steps", None)
    c.update(train_batch_size=2 * hosts, train_micro_batch_size_per_gpu=2, train_steps=steps, steps_per_print=1,
             bf16={"enabled": False}, checkpoint={"every_windows": 0}, tensorboard={"enabled": False})
    c["scheduler"]["params"]["warmup_num_steps"] = min(c["scheduler"]["params"]["warmup_num_steps"], steps)
    c["data"]["dir"] = str(data)
    config = scratch / f"config-{hosts}.json"
    config.write_text(json.dumps(c, indent=2))
    m = json.loads(pathlib.Path(cluster["manifest"]).read_text())
    m["nodes"] = [dict(node, workers=1, threads_per_worker=1) for node in m["nodes"][:hosts]]
    m.update(rings={"count": 2}, oversubscribe=True, timeouts={"join_s": 300})
    manifest = scratch / f"manifest-{hosts}.json"
    manifest.write_text(json.dumps(m, indent=2))
    return config, manifest


def node_processes(run_dir):
    """{node name: pid} of the `troupe node` processes of RUN_DIR (the hosts share this machine's
    process table)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if len(args) > 1 and args[1] == "node" and str(run_dir) in args and "--node" in args:
            found[args[args.index("--node") + 1]] = int(entry)
    return found


def json_lines(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def last_step(run_dir):
    lines = json_lines(run_dir / "metrics.jsonl")
    return lines[-1].get("step", 0) if lines else 0


def record(kind, script, payload):
    """One record through tools/bench-record (docs/bench-results/KIND.jsonl)."""
    subprocess.run([str(ROOT / "tools" / "bench-record"), kind, script], input=json.dumps(payload), text=True,
                   check=True)
