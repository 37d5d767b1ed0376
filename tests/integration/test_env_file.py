"""`source .distrl/up/env.sh` in a fresh shell makes the next commands of docs/operations.md work."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ops.up import Stack, UpConfig
from tests.integration.conftest import REPO


def test_env_file_sets_the_variables_and_puts_the_venv_on_path(tmp_path: Path) -> None:
    stack = Stack(UpConfig(run_dir=tmp_path / "up", project_dir=REPO))
    stack.run_dir.mkdir(parents=True)
    stack.ports = {"s3": 9001, "mlflow": 9002, "prefect": 9003}  # no servers needed to write the file
    stack._write_env_file()
    env_sh = stack.run_dir / "env.sh"
    assert env_sh.stat().st_mode & 0o777 == 0o600  # it holds (dummy) S3 keys
    script = f"source {env_sh} && command -v prefect && command -v distrl && echo $PREFECT_API_URL"
    # A fresh shell: none of this session's variables, only the system PATH.
    out = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    prefect, distrl, api = out.stdout.split()
    assert Path(prefect).parent == Path(distrl).parent and Path(prefect).name == "prefect"
    assert api == "http://127.0.0.1:9003/api"
