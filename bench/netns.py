"""Hosts on one machine with real networking: Linux network namespaces joined by a bridge.

Each host is a network namespace with one veth "cable" to a bridge in the root namespace, an
address of a private subnet (by default the first /24 of 10.77.0.0/16 that nothing here routes yet:
a bridge left behind by a run that was killed, or another run side by side, never blocks a new one) and, for the processes started on it, a host
name of its own (a UTS namespace: `socket.gethostname()` differs per host, as on real machines).
The root namespace gets the bridge's address too: it is the operator's laptop. Pulling a host's
cable is `ip link set <veth> down`; a power cut is SIGKILL to every process in its namespace.

Needs root (CAP_NET_ADMIN) and iproute2; `unavailable()` says why not, for a test to skip.
`Network.down()` removes every namespace, link and process it made, whatever happened before.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

OPERATOR_HOST = 254  # the root namespace's address on the bridge: .254 of the subnet
AUTO_POOL = ipaddress.IPv4Network("10.77.0.0/16")  # where an automatic subnet is taken from, a /24 each
# One lock for every network of this machine (root makes them all, so a fixed path serves everyone).
LOCK_FILE = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()) / "distrl-netns.lock"


@contextlib.contextmanager
def subnet_lock() -> Iterator[None]:
    """Held from reading the routes until the chosen subnet is routed (its bridge up): two networks
    coming up side by side (pytest-xdist workers, two benches) would otherwise both see the same /24
    free and take it."""
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (iproute2 / util-linux)"
    probe = f"distrl-probe-{uuid.uuid4().hex[:6]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed (needs root with CAP_NET_ADMIN): {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def route_overlapping(routes: Sequence[str], subnet: ipaddress.IPv4Network) -> str | None:
    """The first line of `ip -4 route show` whose destination overlaps `subnet` (None: it is free)."""
    for line in routes:
        dest = line.partition(" ")[0]
        if dest not in ("", "default") and ipaddress.ip_network(dest, strict=False).overlaps(subnet):
            return line
    return None


def first_free_subnet(routes: Sequence[str]) -> ipaddress.IPv4Network | None:
    """The first /24 of `AUTO_POOL` that no route here overlaps."""
    for candidate in AUTO_POOL.subnets(new_prefix=24):
        if route_overlapping(routes, candidate) is None:
            return candidate
    return None


@dataclass(frozen=True)
class Host:
    name: str
    """Role name; also the host name its processes see."""
    netns: str
    """Network namespace."""
    address: str
    """Its address on the bridge."""
    cable: str
    """Its veth end on the bridge (root namespace): down = cable pulled."""


class Network:
    """`with Network(["head", "collector-a", ...]) as net:` makes the hosts; everything goes on exit."""

    def __init__(self, names: Sequence[str], subnet: str | None = None) -> None:
        """`subnet=None` takes a free /24 of `AUTO_POOL` when the network comes up; a subnet given
        explicitly is used as it is, and a clash with a route already here is an error."""
        if len(names) >= OPERATOR_HOST:
            raise ValueError(
                f"{len(names)} hosts: at most {OPERATOR_HOST - 1} fit one /24 beside the operator"
            )
        self.names = list(names)
        self.auto_subnet = subnet is None
        self.tag = uuid.uuid4().hex[:4]  # several runs side by side never share a name
        self.bridge = f"drbr{self.tag}"
        net = ipaddress.IPv4Network(subnet) if subnet is not None else next(AUTO_POOL.subnets(new_prefix=24))
        if net.prefixlen > 24:
            raise ValueError(f"subnet {subnet}: use a /24 or larger for {len(names)} hosts and the operator")
        self._address(net)

    def _address(self, net: ipaddress.IPv4Network) -> None:
        self.subnet = net
        self.operator_address = str(net.network_address + OPERATOR_HOST)
        self.hosts = {
            name: Host(
                name, f"distrl-{self.tag}-{name}", str(net.network_address + 1 + i), f"dr{self.tag}h{i}"
            )
            for i, name in enumerate(self.names)
        }

    def __enter__(self) -> Network:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> Network:
        try:
            with subnet_lock():
                self._claim_subnet()
            for host in self.hosts.values():
                _ip("netns", "add", host.netns)
                _ip("link", "add", host.cable, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
                _ip("link", "set", host.cable, "master", self.bridge, "up")
                inside = ("netns", "exec", host.netns, "ip")
                _ip(*inside, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
                _ip(*inside, "link", "set", "eth0", "up")
                _ip(*inside, "link", "set", "lo", "up")
        except BaseException:
            self.down()
            raise
        return self

    def _claim_subnet(self) -> None:
        """Choose the subnet (a free one, or check the one given) and route it: the bridge with the
        operator's address, up. Called under `subnet_lock`."""
        routes = _ip("-4", "route", "show").stdout.splitlines()
        if self.auto_subnet:
            free = first_free_subnet(routes)
            if free is None:
                raise RuntimeError(f"every /24 of {AUTO_POOL} is already routed here; give one (--subnet)")
            self._address(free)
        clash = route_overlapping(routes, self.subnet)
        if clash is not None:
            raise RuntimeError(
                f"subnet {self.subnet} is already routed here ({clash!r}); choose another (--subnet), "
                "or leave it out to take a free one"
            )
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.operator_address}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """`argv` as a process of `host`: in its network namespace, under its own host name."""
        h = self.hosts[host]
        script = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", h.netns, "unshare", "--uts", "sh", "-c", script, h.name, *argv]

    def output(self, host: str, argv: Sequence[str]) -> str:
        """What a short command prints when run on `host` (in its network namespace)."""
        done = _ip("netns", "exec", self.hosts[host].netns, *argv, check=False)
        return done.stdout

    def pull_cable(self, host: str) -> None:
        _ip("link", "set", self.hosts[host].cable, "down")

    def plug_cable(self, host: str) -> None:
        _ip("link", "set", self.hosts[host].cable, "up")

    def pids(self, host: str) -> list[int]:
        listed = _ip("netns", "pids", self.hosts[host].netns, check=False).stdout.split()
        return [int(p) for p in listed if p.isdigit()]

    def power_off(self, host: str) -> list[int]:
        """SIGKILL every process of the host at once, as a power cut (no handler, no flush runs)."""
        killed = []
        for _ in range(5):  # a process forked meanwhile is caught by the next pass
            pids = self.pids(host)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.2)
        return killed

    def down(self) -> None:
        """Kill what runs in the namespaces, unplug and delete the cables, then the namespaces and the
        bridge. Every process goes first, while the cables still carry their connections' last
        packets: a namespace whose sockets still retransmit lingers in the kernel after `ip netns del`,
        and its veth with it, unless the veth is deleted explicitly."""
        present = {
            h.name for h in self.hosts.values() if _ip("netns", "pids", h.netns, check=False).returncode == 0
        }
        for name in present:
            self.power_off(name)
        for host in self.hosts.values():
            _ip("link", "del", host.cable, check=False)  # both ends of the veth go
            if host.name in present:
                _ip("netns", "del", host.netns, check=False)
        _ip("link", "del", self.bridge, check=False)
