"""The continuous evaluator of an embedded run (`train_local`): a child process, or a thread.

A thread of the training process shares its interpreter lock with the learner and the collectors,
so its niceness does little: 15 minutes into a 30-minute asynchronous run, a niceness-19 evaluator
thread had taken 225 s of CPU and the learner's thread 396 s. A child process at that
niceness only gets the CPU the training process leaves, as a deployment's evaluator on its own
work pool does. It reaches the same Prefect API, MLflow registry and store: their addresses are
in the environment it inherits, the Prefect API's added, since an embedded server's address is
known only to this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from functools import partial
from pathlib import Path
from typing import Any

from flows.child_process import die_with_parent, lower_thread_priority
from tasks.evaluator import EvaluatorParams
from tasks.stop import signalled

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]  # the child imports this checkout, whatever its cwd

# How long `finish` waits for the child's last evaluation (it scores the newest version, then stops).
FINISH_TIMEOUT_S = 900.0


def start_embedded_evaluator(
    params: EvaluatorParams, stop_id: str, *, nice: int, in_process: bool
) -> EvaluatorThread | EvaluatorProcess:
    """The evaluator in a child process (`in_process=False`), else in a thread stopped by `stop_id`."""
    if not in_process:
        return EvaluatorProcess(params, nice=nice)
    return EvaluatorThread(params, stop_id, nice=nice)


class EvaluatorThread:
    """The `evaluator` flow in a thread of this process, stopped with the run's stop token."""

    def __init__(self, params: EvaluatorParams, stop_id: str, *, nice: int) -> None:
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(
            target=self._run, args=(params, stop_id, nice), name="evaluator", daemon=True
        )
        self.thread.start()

    def _run(self, params: EvaluatorParams, stop_id: str, nice: int) -> None:
        lower_thread_priority(nice)  # before any thread of its own starts: they inherit it
        from flows.evaluator import evaluator

        try:
            self.result["summary"] = evaluator(params, stop_id)
        except Exception as exc:  # the run goes on without its curve; say why at the end
            log.warning("the continuous evaluator failed: %s", exc)
            self.result["error"] = str(exc)

    def finish(self, *, abort: bool = False) -> dict[str, Any]:
        """Wait until it has scored the last version (the run's stop token is set by then); with
        `abort`, return at once: the daemon thread stops by the token after its current evaluation."""
        if abort:
            return {}
        self.thread.join()
        return self.result


class EvaluatorProcess:
    """`python -m flows.evaluator_child` at niceness `nice`, killed by the kernel if this process
    dies; `finish` asks it to score the newest version and stop, and returns its summary
    ({"error": ...} when it failed)."""

    def __init__(self, params: EvaluatorParams, *, nice: int) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="distrl-evaluator-"))
        self._result = self._folder / "summary.pickle"
        env = dict(os.environ)
        # Read by Prefect when the child imports it: an embedded server's address is known only here.
        env["PREFECT_API_URL"] = _prefect_api_url()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", "flows.evaluator_child", params.model_dump_json(), str(self._result)]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, env=env, preexec_fn=partial(_as_evaluator_child, nice)
        )

    def finish(self, timeout_s: float = FINISH_TIMEOUT_S, *, abort: bool = False) -> dict[str, Any]:
        """The child's summary after it scored the newest version; with `abort` (the run is
        unwinding from an error or a signal) or after SIGTERM/Ctrl-C, {} once it is stopped."""
        try:
            if abort or signalled():  # the child stops at once, without a last evaluation
                self.process.terminate()
                # A child at niceness 19 on a busy machine may not run its handler in time: the
                # `finally` below kills it rather than let the wait's timeout escape the shutdown.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=30)
                return {}
            return self._last_summary(timeout_s)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self._folder, ignore_errors=True)

    def _last_summary(self, timeout_s: float) -> dict[str, Any]:
        with contextlib.suppress(OSError):  # already gone: nothing to tell it
            assert self.process.stdin is not None
            self.process.stdin.close()  # end of input: score the newest version, then stop
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            result = {"error": f"the evaluator process gave no summary within {timeout_s:.0f} s"}
        else:
            if self._result.exists():
                result = pickle.loads(self._result.read_bytes())
            else:
                result = {"error": f"the evaluator process exited with code {self.process.returncode}"}
        if "error" in result:
            log.warning("the continuous evaluator failed: %s", result["error"])
        return result


def _as_evaluator_child(nice: int) -> None:
    """`preexec_fn`: SIGKILL when this process dies, not SIGTERM (on SIGTERM Prefect would first
    fail the flow run through an API that is dying too, and the client's retries would keep the
    child alive for minutes; nothing in it needs saving), then the lower priority."""
    die_with_parent(signal.SIGKILL)
    if nice > 0:
        os.nice(nice)


def _prefect_api_url() -> str:
    """The API this process talks to: the configured one, else its embedded (ephemeral) server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        return configured
    with get_client(sync_client=True) as client:  # starts nothing: the run's server is up already
        return str(client.api_url)
