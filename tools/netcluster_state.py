"""What tools/netcluster and its Slurm part share: where a cluster's state lives, and running commands."""
import json
import pathlib
import subprocess

STATE_ROOT = pathlib.Path("/run/netcluster")


class ClusterError(Exception):
    pass


def run(*argv, check=True, quiet=False, input_text=None):
    result = subprocess.run(list(argv), input=input_text, text=True, capture_output=True)
    if check and result.returncode != 0:
        raise ClusterError(f"{' '.join(argv)}: {result.stderr.strip() or 'exit ' + str(result.returncode)}")
    return result.stdout


def state_dir(prefix):
    return STATE_ROOT / prefix


def load_state(prefix):
    path = state_dir(prefix) / "state.json"
    if not path.exists():
        raise ClusterError(f"no cluster called {prefix!r} ({path} missing; `up` makes one)")
    return json.loads(path.read_text())


def save_state(state):
    path = state_dir(state["name"]) / "state.json"
    path.write_text(json.dumps(state, indent=2) + "\n")
