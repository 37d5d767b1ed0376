"""The rehearsal network takes a subnet nobody routes: a bridge a killed run left behind (or a run
side by side) must not stop the next run, and an explicit subnet that clashes is refused."""

from __future__ import annotations

import ipaddress
import subprocess
import threading
import uuid

import pytest

from bench import netns

ROUTES = [
    "default via 172.17.0.1 dev eth0",
    "10.77.0.0/24 dev drbr3969 proto kernel scope link src 10.77.0.254",
    "10.77.1.0/24 dev drbr77aa proto kernel scope link src 10.77.1.254",
    "172.17.0.0/16 dev eth0 proto kernel scope link src 172.17.0.5",
]


def test_the_first_subnet_no_route_overlaps_is_taken() -> None:
    assert netns.first_free_subnet(ROUTES) == ipaddress.ip_network("10.77.2.0/24")
    assert netns.first_free_subnet(ROUTES[:1]) == ipaddress.ip_network("10.77.0.0/24")


def test_a_wider_route_over_the_whole_pool_leaves_nothing_free() -> None:
    assert netns.first_free_subnet(["10.0.0.0/8 dev tun0 scope link"]) is None


def test_an_overlap_is_reported_with_the_route_that_causes_it() -> None:
    assert "drbr3969" in (netns.route_overlapping(ROUTES, ipaddress.ip_network("10.77.0.0/24")) or "")
    assert netns.route_overlapping(ROUTES, ipaddress.ip_network("10.78.0.0/24")) is None


@pytest.mark.netns
def test_a_bridge_left_behind_on_the_default_subnet_does_not_block_a_new_network() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    stale = f"drstale{uuid.uuid4().hex[:4]}"  # what a run killed before its clean-up leaves
    with netns.subnet_lock():  # another test's network may be coming up meanwhile
        routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, check=True)
        squatted = netns.first_free_subnet(routes.stdout.splitlines())
        assert squatted is not None
        subprocess.run(["ip", "link", "add", stale, "type", "bridge"], check=True)
        subprocess.run(
            ["ip", "addr", "add", f"{squatted.network_address + 254}/24", "dev", stale], check=True
        )
        subprocess.run(["ip", "link", "set", stale, "up"], check=True)
    try:
        with pytest.raises(RuntimeError, match="already routed"):
            netns.Network(["a"], str(squatted)).up()
        with netns.Network(["a", "b"]) as net:
            assert net.subnet != squatted and not net.subnet.overlaps(squatted)
            inside = net.output("a", ["ip", "-4", "addr", "show", "eth0"])
            assert f"{net.hosts['a'].address}/24" in inside, inside
        assert net.bridge not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "link", "del", stale], check=False)


@pytest.mark.netns
def test_networks_coming_up_side_by_side_take_different_subnets() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    networks = [netns.Network([f"h{i}"]) for i in range(4)]
    barrier = threading.Barrier(len(networks))
    errors: list[BaseException] = []

    def up(network: netns.Network) -> None:
        barrier.wait()  # all read the routes at once: without the lock they would all see one /24 free
        try:
            network.up()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=up, args=(network,)) for network in networks]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        subnets = [network.subnet for network in networks]
        assert len(set(subnets)) == len(networks), subnets
        for network in networks:  # each host reaches its own operator address
            host = network.hosts[network.names[0]]
            assert host.address in network.output(network.names[0], ["ip", "-4", "addr", "show", "eth0"])
    finally:
        for network in networks:
            network.down()
