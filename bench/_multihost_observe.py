"""What `bench.multihost` reads off the hosts: shards reported in logs, log lines of a time window,
TCP connections waiting on a server."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

WROTE_SHARD = re.compile(r"wrote shard (s3://\S+?\.parquet)")
# Lines worth reading in the logs of the cut window: warnings, errors, retries, and progress.
NOTABLE = re.compile(
    r"WARNING|ERROR|retr|fail|wrote shard|publish|updates \d+-\d+|episodes, \d+ succeeded", re.I
)


def tcp_to(ss_output: str, address: str, ports: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per server (by port) of `address`: connections in `ss -tnH` output, those with request bytes
    the server has not acknowledged (a call blocked, its data being retransmitted), and those bytes."""
    service = {f"{address}:{port}": name for name, port in ports.items()}
    found: dict[str, dict[str, int]] = {}
    for line in ss_output.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[4] not in service:
            continue
        counts = found.setdefault(service[parts[4]], {"connections": 0, "blocked": 0, "unsent_bytes": 0})
        counts["connections"] += 1
        counts["blocked"] += int(parts[2]) > 0
        counts["unsent_bytes"] += int(parts[2])
    return found


def log_window(start: dict[Path, int], end: dict[Path, int], root: Path) -> dict[str, dict[str, Any]]:
    """What each host's processes logged between two moments: line counts and the notable lines."""
    by_host: dict[str, dict[str, Any]] = {}
    for path, size in end.items():
        with path.open("rb") as fh:
            fh.seek(start.get(path, 0))
            text = fh.read(size - start.get(path, 0)).decode(errors="replace")
        lines = [line for line in text.splitlines() if line.strip()]
        name = str(path.relative_to(root))
        notable, seen = [], set()
        for line in lines:
            if not NOTABLE.search(line):
                continue
            key = re.sub(r"[0-9a-f]{6,}|\d+(\.\d+)?", "#", line.split(" | ")[-1])[:120]
            if key not in seen:
                seen.add(key)
                notable.append(line[-300:])
        by_host[name] = {
            "lines": len(lines),
            "shards_written": len(WROTE_SHARD.findall(text)),
            "warnings": sum(1 for line in lines if "WARNING" in line or "ERROR" in line),
            "notable": notable[:12],
        }
    return by_host


def shard_rows(urls: list[str]) -> list[int]:
    """Rows of each shard (s3:// URLs) of the store this process's environment names, read side by
    side: one at a time took ~3 s a shard on a loaded machine."""
    from storage.catalog import read_shard
    from storage.store import open_store

    store = open_store()
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda url: read_shard(store, url.removeprefix("s3://")).num_rows, urls))
