"""A netcluster host's network faults as nftables rules (tools/netcluster `loss`, `cut`, `heal`), and
connection resets (`reset`).

Each host keeps its faults in the cluster's state — `drop_all`, `loss` (percent), `cut_peers`
(entries "ADDRESS", or "ADDRESS:PORT" for one TCP port only) — and `apply_filters` rewrites the
host's `inet netcluster` table from them: the same rules on input (from the peer) and on output
(to it). A cut with a port drops TCP segments to or from that port on either end, so a split
between two hosts' etcd members (port 2380) leaves the rest of their traffic alone.
"""
from netcluster_state import run


def in_host(host, *argv, check=True):
    return run("ip", "netns", "exec", host["name"], *argv, check=check)


def peer_rules(entry):
    """The input rules for one cut_peers entry (from that peer)."""
    address, _, port = entry.partition(":")
    if not port:
        return [f"ip saddr {address} drop"]
    return [f"ip saddr {address} tcp dport {port} drop", f"ip saddr {address} tcp sport {port} drop"]


def apply_filters(host):
    """Writes the host's nftables table from its fault state: loss, a full drop, dropped peers."""
    rules = []
    if host.get("drop_all"):
        rules.append("meta iifname != \"lo\" drop")
    for entry in host.get("cut_peers", []):
        rules += peer_rules(entry)
    if host.get("loss", 0) >= 100:
        rules.append("meta iifname != \"lo\" drop")
    elif host.get("loss", 0) > 0:
        # In hundredths of a percent, so that 0.5 works too.
        rules.append(f"meta iifname != \"lo\" numgen random mod 10000 < {round(host['loss'] * 100)} drop")
    output_rules = [r.replace("iifname", "oifname").replace("saddr", "daddr") for r in rules]
    # One nft transaction: the table made if absent, dropped, and written anew (when there are
    # rules), so the host's rules change at once and with one process on a loaded machine.
    text = "table inet netcluster\ndelete table inet netcluster\n"
    if rules:
        text += ("table inet netcluster {\n"
                 "  chain input { type filter hook input priority -10; policy accept;\n    " + "\n    ".join(rules) +
                 "\n  }\n"
                 "  chain output { type filter hook output priority -10; policy accept;\n    " +
                 "\n    ".join(output_rules) + "\n  }\n}\n")
    run("ip", "netns", "exec", host["name"], "nft", "-f", "-", input_text=text)


def cut_between(host, peers, port=None):
    """Drops what HOST and each of PEERS send each other (on PORT only, when given), both ways:
    HOST's rules are written once, then each peer's, so a partition is in place within one
    command's few nft calls rather than one command per pair."""
    def add(one, other):
        entry = other["address"] + (f":{port}" if port else "")
        one.setdefault("cut_peers", [])
        if entry not in one["cut_peers"]:
            one["cut_peers"].append(entry)

    for peer in peers:
        add(host, peer)
    apply_filters(host)
    for peer in peers:
        add(peer, host)
        apply_filters(peer)


def cut(host, drop):
    """HOST cut off: its link down (carrier lost), or with DROP every packet dropped, link up."""
    if drop:
        host["drop_all"] = True
        apply_filters(host)
    else:
        run("ip", "link", "set", host["veth"], "down")
        host["link_down"] = True


def heal(state, host):
    """Undoes cut and loss on HOST, and cuts naming HOST on its peers; its rate stays. Only the hosts
    whose rules change are rewritten (HOST first), so a heal lands within a few nft calls."""
    run("ip", "link", "set", host["veth"], "up")
    host.update(link_down=False, drop_all=False, loss=0, cut_peers=[])
    apply_filters(host)
    for other in state["hosts"]:
        if other is host:
            continue
        kept = [e for e in other.get("cut_peers", []) if e.partition(":")[0] != host["address"]]
        if kept != other.get("cut_peers", []):
            other["cut_peers"] = kept
            apply_filters(other)


def set_loss(host, percent):
    host["loss"] = percent
    apply_filters(host)


def reset_connections(host, port):
    """Aborts HOST's TCP connections to or from PORT (ss -K): the peer of each gets a reset, as from a
    middlebox or a firewall, while every packet still flows. Returns how many it aborted."""
    listing = in_host(host, "ss", "-K", "-t", "-n", "-H", f"( dport = :{port} or sport = :{port} )")
    return len([line for line in listing.splitlines() if line.strip()])
