"""No way out to the network from the sandbox: TCP and UDP, over IPv4 and IPv6, to loopback and to this
machine's own non-loopback address. Each destination has a listener of its own that the same code
reaches from outside the sandbox (so a refusal inside means something), and that hears nothing from
inside it, with or without the seccomp filter (a task that declares it starts processes runs without)."""

import socket
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from autoresearch_mcp.sandbox.runner import Limits, network_namespace_available, run_sandboxed

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"
PROFILES = {
    "plain": Limits(wall_s=60, cpu_s=30, memory_mb=512),
    "new processes": Limits(wall_s=60, cpu_s=30, memory_mb=512, new_processes=True),
}
pytestmark = pytest.mark.skipif(
    not network_namespace_available(), reason="no network namespace here: a candidate can use the network"
)

ATTACK = """\
import socket


def attack(targets):
    reached = {}
    for name, family, kind, host, port in targets:
        try:
            with socket.socket(family, kind) as sock:
                sock.settimeout(2)
                if kind == socket.SOCK_STREAM:
                    sock.connect((host, port))
                    reached[name] = "connected"
                else:
                    sock.sendto(name.encode(), (host, port))
                    reached[name] = "sent"
        except OSError as exc:
            reached[name] = type(exc).__name__
    return reached
"""


def own_address(family: socket.AddressFamily, somewhere: str) -> str | None:
    """This machine's address on its route to `somewhere` (a documentation address, never contacted:
    a UDP connect sends nothing), or None without such a route."""
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((somewhere, 9))
        except OSError:
            return None
        return probe.getsockname()[0]


class Target(NamedTuple):
    name: str  # protocol-ip version-where, e.g. "udp-ipv6-non-loopback"
    family: socket.AddressFamily
    kind: socket.SocketKind
    host: str | None  # None: this machine has no such address


DESTINATIONS = {
    "ipv4-loopback": (socket.AF_INET, lambda: "127.0.0.1"),
    "ipv4-non-loopback": (socket.AF_INET, lambda: own_address(socket.AF_INET, "203.0.113.1")),
    "ipv6-loopback": (socket.AF_INET6, lambda: "::1" if socket.has_ipv6 else None),
    "ipv6-non-loopback": (socket.AF_INET6, lambda: own_address(socket.AF_INET6, "2001:db8::1")),
}
TARGETS = [
    Target(f"{proto}-{where}", family, kind, address())
    for proto, kind in (("tcp", socket.SOCK_STREAM), ("udp", socket.SOCK_DGRAM))
    for where, (family, address) in DESTINATIONS.items()
]


def listen(target: Target) -> socket.socket:
    assert target.host is not None
    sock = socket.socket(target.family, target.kind)
    sock.bind((target.host, 0))
    if target.kind == socket.SOCK_STREAM:
        sock.listen()
    sock.setblocking(False)
    return sock


def heard(sock: socket.socket) -> bool:
    """Whether anything arrived: a connection waiting to be accepted, or a datagram."""
    try:
        if sock.type == socket.SOCK_STREAM:
            sock.accept()[0].close()
        else:
            sock.recv(64)
    except BlockingIOError:
        return False
    return True


class Outcome(NamedTuple):
    reached: dict[str, Any]  # what the code said, per target
    heard: dict[str, bool]  # what each listener got


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, Outcome]]:
    """Every target tried at once, outside the sandbox first, then in one sandbox run per profile."""
    there = [t for t in TARGETS if t.host is not None]
    listeners = {t.name: listen(t) for t in there}
    try:
        targets = [
            [t.name, int(t.family), int(t.kind), t.host, listeners[t.name].getsockname()[1]] for t in there
        ]
        namespace: dict[str, Any] = {}
        exec(ATTACK, namespace)
        results = {"outside": Outcome(namespace["attack"](targets), {})}
        results["outside"].heard.update({name: heard(sock) for name, sock in listeners.items()})
        for profile, limits in PROFILES.items():
            run = run_sandboxed(SCRIPT, {"source": ATTACK, "call": "attack", "args": [targets]}, limits)
            assert run.status == "ok" and run.result is not None, run.output_tail
            results[profile] = Outcome(run.result["value"], {n: heard(s) for n, s in listeners.items()})
        yield results
    finally:
        for sock in listeners.values():
            sock.close()


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_no_packet_leaves_the_sandbox_for_any_protocol_family_or_address(
    outcomes: dict[str, Outcome], target: Target, profile: str
):
    if target.host is None:
        pytest.skip(f"this machine has no address to try {target.name} with (no route, or no IPv6)")
    outside, inside = outcomes["outside"], outcomes[profile]
    # Outside, the same code gets through: the listener is there and reachable.
    assert outside.reached[target.name] in ("connected", "sent") and outside.heard[target.name]
    # Inside, the connect or the send fails, and the listener hears nothing either way.
    assert inside.reached[target.name] not in ("connected", "sent"), inside.reached
    assert not inside.heard[target.name]
