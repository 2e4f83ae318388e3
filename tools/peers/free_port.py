"""A TCP port on 127.0.0.1 that the OS says is free, for the peers' process groups (no fixed
ports, so parallel runs cannot collide)."""
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
