"""Shell commands that client libraries parse for device facts: ``dumpsys package``, ``ifconfig`` /
``ip addr`` (the Wi-Fi address), ``which`` and ``log`` (write to the log buffer).

Outputs are laid out like an Android 14 x86_64 emulator's (toybox ``ifconfig``/``which``/``log``,
iproute2 ``ip``, PackageManagerService's dump), down to the fields adbutils' ``app_info``,
``package_info`` and ``wlan_ip`` read. An emulator's Wi-Fi is a virtual network of its own, so every
device has the emulator's address 10.0.2.16 on ``wlan0``, while Wi-Fi is on (``svc wifi enable``,
the ``wifi_on`` setting) and airplane mode off. The caller holds the device lock.
"""

from __future__ import annotations

import zlib

from simulators.fake_adb import commands_system
from simulators.fake_adb.commands_debug import installed_packages
from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import LOG_PRIORITIES, FakeDevice

WLAN_ADDRESS = "10.0.2.16"
_WLAN_MAC = "02:15:b2:00:00:00"
_IMAGE_DATE = "2024-01-01 00:00:00"  # when the system image "installed" its apps
_PACKAGE_FLAGS = "SYSTEM HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP"


def _wifi_up(device: FakeDevice) -> bool:
    phone = device.phone
    return phone.settings_get("global", "wifi_on") != "0" and phone.settings_get(
        "global", "airplane_mode_on"
    ) not in ("1",)


def dumpsys(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """``dumpsys package <pkg>`` here; every other service as :func:`commands_system.dumpsys`."""
    if args[:1] != ["package"]:
        return commands_system.dumpsys(device, args, stdin)
    names = [arg for arg in args[1:] if not arg.startswith("-")]
    if not names or names[0] not in installed_packages():
        # What PackageManagerService prints for a name it does not know; it still exits 0.
        wanted = names[0] if names else ""
        return ShellOutput(stdout=f"Dexopt state:\n  Unable to find package: {wanted}\n".encode())
    return ShellOutput(stdout=_package_dump(names[0]).encode())


def _package_dump(package: str) -> str:
    token = f"{zlib.crc32(package.encode()):08x}"
    signature = f"{zlib.crc32(b'platform'):08x}"  # system apps share the platform key
    return (
        "Packages:\n"
        f"  Package [{package}] ({token}):\n"
        "    userId=1000\n"
        f"    pkg=Package{{{token[:7]} {package}}}\n"
        f"    codePath=/data/app/{package}\n"
        "    primaryCpuAbi=x86_64\n"
        "    versionCode=34 minSdk=34 targetSdk=34\n"
        "    versionName=14\n"
        f"    flags=[ {_PACKAGE_FLAGS} ]\n"
        f"    timeStamp={_IMAGE_DATE}\n"
        f"    lastUpdateTime={_IMAGE_DATE}\n"
        f"    signatures=PackageSignatures{{{token[:7]} version:3, signatures:[{signature}], past signatures:[]}}\n"
        f"    pkgFlags=[ {_PACKAGE_FLAGS} ]\n"
        "    User 0: ceDataInode=0 installed=true hidden=false suspended=false stopped=false enabled=0\n"
        f"      firstInstallTime={_IMAGE_DATE}\n"
    )


def ifconfig(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    names = [arg for arg in args if not arg.startswith("-")]
    if len(names) > 1:  # configuring an interface needs root
        return ShellOutput(stderr=b"ifconfig: ioctl 8916: Permission denied\n", exit_code=1)
    shown = names or ["lo", "wlan0"]
    out = []
    for name in shown:
        if name == "lo":
            out.append(
                "lo        Link encap:Local Loopback\n"
                "          inet addr:127.0.0.1  Mask:255.0.0.0\n"
                "          UP LOOPBACK RUNNING  MTU:65536  Metric:1\n\n"
            )
        elif name == "wlan0":
            inet = (
                f"          inet addr:{WLAN_ADDRESS}  Bcast:10.0.2.255  Mask:255.255.255.0\n"
                if _wifi_up(device)
                else ""
            )
            state = "UP BROADCAST RUNNING MULTICAST" if inet else "BROADCAST MULTICAST"
            out.append(
                f"wlan0     Link encap:Ethernet  HWaddr {_WLAN_MAC}\n{inet}"
                f"          {state}  MTU:1500  Metric:1\n\n"
            )
        else:
            return ShellOutput(stderr=f"ifconfig: {name}: No such device\n".encode(), exit_code=1)
    return ShellOutput(stdout="".join(out).encode())


def ip(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """``ip addr|a|address [show] [dev] [IFACE]``: the only ``ip`` object a client reads."""
    words = [arg for arg in args if not arg.startswith("-")]
    if not words or words[0] not in ("addr", "address", "a"):
        return ShellOutput(stderr=b"Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n", exit_code=255)
    rest = [word for word in words[1:] if word not in ("show", "list", "dev")]
    if rest and rest[0] not in ("lo", "wlan0"):
        return ShellOutput(stderr=f'Device "{rest[0]}" does not exist.\n'.encode(), exit_code=1)
    blocks = {
        "lo": (
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n"
            "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
            "    inet 127.0.0.1/8 scope host lo\n"
            "       valid_lft forever preferred_lft forever\n"
        ),
        "wlan0": _ip_wlan(_wifi_up(device)),
    }
    return ShellOutput(stdout="".join(blocks[name] for name in (rest[:1] or ["lo", "wlan0"])).encode())


def _ip_wlan(up: bool) -> str:
    flags, state = ("<BROADCAST,MULTICAST,UP,LOWER_UP>", "UP") if up else ("<BROADCAST,MULTICAST>", "DOWN")
    inet = (
        f"    inet {WLAN_ADDRESS}/24 brd 10.0.2.255 scope global wlan0\n"
        "       valid_lft forever preferred_lft forever\n"
        if up
        else ""
    )
    return (
        f"15: wlan0: {flags} mtu 1500 qdisc mq state {state} group default qlen 1000\n"
        f"    link/ether {_WLAN_MAC} brd ff:ff:ff:ff:ff:ff\n{inet}"
    )


def which(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    # The shell's commands are the device's binaries; toybox's which prints nothing for a miss.
    from simulators.fake_adb.shell import BINARIES  # the full table, built from this module too

    names = [arg for arg in args if not arg.startswith("-")]
    found = [f"/system/bin/{name}\n" for name in names if name in BINARIES]
    return ShellOutput(
        stdout="".join(found).encode(), exit_code=0 if names and len(found) == len(names) else 1
    )


def log(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """toybox ``log [-p PRIORITY] [-t TAG] MESSAGE...``: one line into the device log (default ``I/log``)."""
    priority, tag, index = "I", "log", 0
    while index < len(args) and args[index] in ("-p", "-t") and index + 1 < len(args):
        if args[index] == "-p":
            priority = args[index + 1][:1].upper()
        else:
            tag = args[index + 1]
        index += 2
    if priority not in LOG_PRIORITIES:
        return ShellOutput(stderr=f"log: bad -p '{priority.lower()}'\n".encode(), exit_code=1)
    device.log(tag, " ".join(args[index:]), priority)
    return ShellOutput()


COMMANDS = {"dumpsys": dumpsys, "ifconfig": ifconfig, "ip": ip, "which": which, "log": log}
