"""bench/multihost's readings off the hosts: connections blocked on the head, log lines of a window,
and the reason given where network namespaces cannot be made."""

from __future__ import annotations

from bench import netns
from bench._multihost_observe import log_window, tcp_to

SS = """\
ESTAB      0      0      10.77.0.2:51234 10.77.0.1:4200
ESTAB      0      517    10.77.0.2:51240 10.77.0.1:4200
ESTAB      0      12431  10.77.0.2:40110 10.77.0.1:9000
ESTAB      0      0      10.77.0.2:40112 10.77.0.9:9000
"""


def test_connections_blocked_on_each_server_of_the_head() -> None:
    assert tcp_to(SS, "10.77.0.1", {"prefect": 4200, "mlflow": 5000, "s3": 9000}) == {
        "prefect": {"connections": 2, "blocked": 1, "unsent_bytes": 517},
        "s3": {"connections": 1, "blocked": 1, "unsent_bytes": 12431},
    }


def test_log_window_reads_only_the_lines_written_between_two_moments(tmp_path) -> None:
    log = tmp_path / "collector-a" / "worker-1.log"
    log.parent.mkdir()
    log.write_text(
        "12:00:00.000 | INFO    | storage.shards - wrote shard s3://b/s/a0-000000-x.parquet (9 steps)\n"
    )
    start = {log: log.stat().st_size}
    with log.open("a") as fh:
        fh.write("12:00:01.000 | WARNING | shard write attempt 1/5 to s3://b/s/a0-000001-y.parquet failed\n")
        fh.write("12:00:02.000 | WARNING | shard write attempt 2/5 to s3://b/s/a0-000001-y.parquet failed\n")
        fh.write(
            "12:00:03.000 | INFO    | storage.shards - wrote shard s3://b/s/a0-000001-y.parquet (8 steps)\n"
        )
    window = log_window(start, {log: log.stat().st_size}, tmp_path)["collector-a/worker-1.log"]
    assert window["lines"] == 3 and window["shards_written"] == 1 and window["warnings"] == 2
    assert len(window["notable"]) == 2  # the second attempt's line says nothing new


def test_no_namespaces_without_iproute2(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `ip`, no `unshare`
    assert "`ip` is not installed" in (netns.unavailable() or "")
