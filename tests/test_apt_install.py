"""`make system-deps` / `make browser-deps` (.ci/apt-install) with a fake `apt-get` and `id` on PATH:
a lock held by another process is said, with apt's own line, and waited for; other failures and a
lock held too long are one warning naming the cause. Nothing is installed for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)"
FAKE_APT = f"""#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls"
held=$(cat "$FAKE_DIR/held")
if [ "$held" -gt 0 ]; then
  echo $((held - 1)) > "$FAKE_DIR/held"
  echo "{LOCK}" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
[ -z "$FAKE_APT_ERROR" ] || {{ echo "$FAKE_APT_ERROR" >&2; exit 100; }}
"""
TARGETS = [
    ("browser-deps", "chromium", "the UI browser test"),
    ("system-deps", "adb", "the adb CLI tests"),
    ("postgres-deps", "postgresql", "the PostgreSQL integration test"),
]


def _make(
    tmp_path: Path,
    target: str,
    *,
    held: int,
    uid: int = 0,
    error: str = "",
    wait_s: int = 300,
    postgres_bin_dirs: str = "",
) -> str:
    """`make TARGET` with only the fakes and the shell tools it uses on PATH (so the command is missing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sh", "grep", "sleep", "mktemp", "tail", "date", "rm", "cat", "sed"):
        target_path = bin_dir / tool
        if not target_path.exists():
            target_path.symlink_to(shutil.which(tool) or pytest.fail(f"{tool} is not installed"))
    (bin_dir / "apt-get").write_text(FAKE_APT)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for fake in ("apt-get", "id"):
        (bin_dir / fake).chmod(0o755)
    (tmp_path / "held").write_text(str(held))
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "FAKE_DIR": str(tmp_path),
        "FAKE_APT_ERROR": error,
        "APT_LOCK_WAIT_S": str(wait_s),
        "APT_LOCK_RETRY_S": "0",
        # Where `make postgres-deps` looks for initdb: nowhere, unless a test says (it may be installed here).
        "POSTGRES_BIN_DIRS": postgres_bin_dirs or str(tmp_path / "no-postgresql" / "*" / "bin"),
    }
    make = shutil.which("make") or pytest.skip("make is not installed")
    done = subprocess.run(
        [make, "-s", "-C", str(ROOT), target], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr  # a missing package never fails `make test`
    return done.stdout


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []


@pytest.mark.parametrize(("target", "package", "skipped"), TARGETS)
def test_a_held_lock_is_said_and_waited_for(tmp_path: Path, target: str, package: str, skipped: str) -> None:
    out = _make(tmp_path, target, held=2)
    assert out.splitlines() == [
        f"apt's lock is held by another process ({LOCK}); waiting up to 300 s to install {package}",
        f"installed {package}",
    ], out
    assert _calls(tmp_path) == ["update -qq"] * 3 + [f"install -y -qq {package}"]


@pytest.mark.parametrize(("target", "package", "skipped"), TARGETS)
def test_a_lock_held_too_long_or_another_failure_is_one_warning(
    tmp_path: Path, target: str, package: str, skipped: str
) -> None:
    out = _make(tmp_path, target, held=1000, wait_s=0)
    assert out.strip() == (
        f"warning: could not install {package}: apt's lock is still held by another process after 0 s "
        f"({LOCK}); run make again once it is done (or set APT_LOCK_WAIT_S); {skipped} will be skipped"
    )
    out = _make(tmp_path, target, held=0, error=f"E: Unable to locate package {package}")
    assert out.strip() == (
        f"warning: could not install {package} (E: Unable to locate package {package}); {skipped} will be skipped"
    )


def test_without_root_it_says_what_to_install(tmp_path: Path) -> None:
    out = _make(tmp_path, "browser-deps", held=0, uid=1000)
    assert out.strip() == (
        "note: chromium is not installed (apt-get install chromium); the UI browser test will be skipped"
    )
    assert not _calls(tmp_path)
    assert os.access(ROOT / ".ci" / "apt-install", os.X_OK)


def test_installed_postgresql_is_found_off_path(tmp_path: Path) -> None:
    """Debian keeps initdb in /usr/lib/postgresql/<version>/bin, off PATH: the pattern finds it."""
    bin_dir = tmp_path / "lib" / "15" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "initdb").write_text("#!/bin/sh\n")
    (bin_dir / "initdb").chmod(0o755)
    out = _make(tmp_path, "postgres-deps", held=0, postgres_bin_dirs=str(tmp_path / "lib" / "*" / "bin"))
    assert out == ""
    assert not _calls(tmp_path)
