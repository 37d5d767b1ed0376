"""Each published policy version is an MLflow pyfunc model: its MLmodel opens, it loads and acts like
the policy itself, a damaged copy is refused, and `mlflow models serve` answers with an action."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.policy_mlflow import MLFLOW_FILES, input_example
from storage.registry import PolicyRegistry, RegistrySettings

ROOT = Path(__file__).resolve().parents[2]
MODEL_URI = "models:/distrl-policy@champion"
STEP = {
    "instruction": "Turn on Wi-Fi",
    "observation_text": '[0] Switch "Wi-Fi" off (0,420,1080,540)\n[1] Switch "Bluetooth" on (0,540,1080,660)',
    "previous_actions": "key(HOME)",
}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, tokenizer) -> tuple[PolicyRegistry, Path]:
    """A tracking store with one tiny policy published and made champion; the policy's own files."""
    from distrl_core.policy import Policy, PolicyConfig, save_policy

    root = tmp_path_factory.mktemp("pyfunc")
    registry = PolicyRegistry(
        RegistrySettings(tracking_uri=f"sqlite:///{root}/mlflow.db", cache_dir=str(root / "cache"))
    )
    saved = save_policy(Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer), root / "policy")
    registry.set_alias("champion", registry.publish(saved, run_id=registry.start_run("learner")))
    return registry, saved


@pytest.fixture
def tracking(published, monkeypatch: pytest.MonkeyPatch) -> PolicyRegistry:
    registry, _ = published
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry.settings.tracking_uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", registry.settings.tracking_uri)
    return registry


def _policy_answer(saved: Path, step: dict[str, str]) -> tuple[str, float]:
    """What the policy itself, loaded the project's way, does greedily on `step`."""
    import pandas as pd

    from distrl_core.envs.actions import format_action
    from distrl_core.policy import load_policy
    from tasks.policy_pyfunc import observations_of

    policy = load_policy(saved).eval()
    (out,) = policy.act(observations_of(pd.DataFrame([step]), policy.config.screen_size), greedy=True)
    return format_action(out.action), out.logprob


def test_the_model_version_has_an_mlmodel_with_signature_and_example(tracking) -> None:
    import mlflow

    info = mlflow.models.get_model_info(MODEL_URI)  # reads <source>/MLmodel, as the MLflow UI does
    assert info.flavors["python_function"]["loader_module"] == "tasks.policy_pyfunc"
    assert [c["name"] for c in info.signature.inputs.to_dict()][:2] == ["instruction", "observation_text"]
    assert [c["name"] for c in info.signature.outputs.to_dict()] == ["action", "logprob", "raw_output"]
    assert info.saved_input_example_info is not None
    # The policy's own files are untouched: the registry still fetches and checks them.
    fetched = tracking.fetch("champion")
    assert (fetched.path / "policy.json").is_file() and all(
        (fetched.path / f).is_file() for f in MLFLOW_FILES
    )


def test_loaded_model_acts_as_the_policy_does(tracking, published) -> None:
    import mlflow
    import pandas as pd

    from distrl_core.policy import build_candidates

    model = mlflow.pyfunc.load_model(MODEL_URI)
    answer = model.predict(pd.DataFrame([STEP]))
    action, logprob = _policy_answer(published[1], STEP)
    assert list(answer["action"]) == [action]
    assert answer["logprob"][0] == pytest.approx(logprob, abs=1e-5)
    assert action in {c.action_text for c in build_candidates(STEP["instruction"], STEP["observation_text"])}
    # The saved example is valid input; sampling returns a proper log-probability too.
    sampled = model.predict(pd.DataFrame(input_example()), params={"greedy": False})
    assert sampled["logprob"][0] <= 0.0 and sampled["action"][0]


def test_a_damaged_file_in_the_artifact_store_is_refused(tracking, tmp_path: Path) -> None:
    import shutil

    import mlflow

    from storage.policy_manifest import PolicyIntegrityError

    source = Path(mlflow.artifacts.download_artifacts(MODEL_URI, dst_path=str(tmp_path / "copy")))
    heads = source / "heads.pt"
    heads.write_bytes(heads.read_bytes()[:-8] + b"damaged!")
    with pytest.raises(PolicyIntegrityError, match=r"heads\.pt does not hash"):
        mlflow.pyfunc.load_model(str(source))
    # A manifest rewritten to match the damage does not pass either: the MLmodel recorded its digest.
    from storage.policy_manifest import write_manifest

    write_manifest(source)
    with pytest.raises(PolicyIntegrityError, match=r"manifest\.json does not hash"):
        mlflow.pyfunc.load_model(str(source))
    shutil.rmtree(source)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def _mlflow(arguments: list[str], registry: PolicyRegistry, ready: str, tmp_path: Path) -> Iterator[str]:
    """`mlflow <arguments>` serving on a free loopback port; yields its URL once `ready` answers."""
    port = _free_port()
    bin_dir = Path(sys.executable).parent  # the scoring server is started as `uvicorn` from PATH
    env = os.environ | {
        "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
        "MLFLOW_TRACKING_URI": registry.settings.tracking_uri,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    log_path = tmp_path / "mlflow.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(bin_dir / "mlflow"), *arguments, "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers stop with it
        )
        try:
            deadline = time.monotonic() + 240
            while True:
                assert server.poll() is None, log_path.read_text()[-3000:]
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=5).close()
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet
                    assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                    time.sleep(1)
            yield f"http://127.0.0.1:{port}"
        finally:
            if server.poll() is None:
                os.killpg(server.pid, 15)
                server.wait(timeout=30)


@pytest.mark.slow
def test_mlflow_models_serve_answers_with_an_action(published, tmp_path: Path) -> None:
    registry, saved = published
    serve = ["models", "serve", "-m", MODEL_URI, "--env-manager", "local"]
    with _mlflow(serve, registry, "/ping", tmp_path) as url:
        answer = _post(f"{url}/invocations", {"dataframe_records": [STEP]})
    (row,) = answer["predictions"]
    action, logprob = _policy_answer(saved, STEP)
    assert row["action"] == action
    assert row["logprob"] == pytest.approx(logprob, abs=1e-5)


@pytest.mark.slow
def test_the_mlflow_ui_finds_the_model_versions_mlmodel(published, tmp_path: Path) -> None:
    registry, _ = published
    server = ["server", "--backend-store-uri", registry.settings.tracking_uri]
    with _mlflow(server, registry, "/health", tmp_path) as url:
        # What the UI's model version page asks for (it logged a 500 when the file was missing).
        path = "/model-versions/get-artifact?path=MLmodel&name=distrl-policy&version=1"
        with urllib.request.urlopen(f"{url}{path}", timeout=60) as response:
            mlmodel = response.read().decode()
    assert "loader_module: tasks.policy_pyfunc" in mlmodel and "distrl_manifest_sha256" in mlmodel
