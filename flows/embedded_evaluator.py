"""The continuous evaluator of an embedded run (`train_local`): a child process, or a thread.

A thread of the training process shares its interpreter lock with the learner and the collectors,
so its niceness does little: measured in a 30-minute asynchronous run, a niceness-19 evaluator
thread still took 225 s of CPU while the learner's thread got 396 s. A child process at that
niceness only gets the CPU the training process leaves, as a deployment's evaluator on its own
work pool does, and it reaches the same Prefect API, MLflow registry and store (their addresses
are in the environment it inherits; the Prefect API's is passed on, since an embedded server's
address is known only to this process).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

from flows.processes import die_with_parent, lower_thread_priority
from tasks.evaluator import EvaluatorParams
from tasks.stop import StopToken, signalled

log = logging.getLogger(__name__)

# How long `finish` waits for the child's last evaluation (it scores the newest version, then stops).
FINISH_TIMEOUT_S = 900.0


def start_embedded_evaluator(
    params: EvaluatorParams, stop_id: str, *, nice: int, in_process: bool
) -> EvaluatorThread | EvaluatorProcess:
    """The evaluator in a child process (`in_process=False`), else in a thread stopped by `stop_id`.
    A daemonic process cannot have children, so there it falls back to the thread."""
    if not in_process and not multiprocessing.current_process().daemon:
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

    def finish(self) -> dict[str, Any]:
        """Wait until it has scored the last version (the run's stop token is set by then)."""
        self.thread.join()
        return self.result


class EvaluatorProcess:
    """The `evaluator` flow in a spawned child at niceness `nice`; `finish` asks it to score the
    newest version and stop, and returns its summary ({"error": ...} when it failed)."""

    def __init__(self, params: EvaluatorParams, *, nice: int) -> None:
        context = multiprocessing.get_context("spawn")  # no forked copy of the learner's threads
        self._stop = context.Event()
        self._results, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_child,
            args=(params.model_dump(mode="json"), _prefect_api_url(), nice, self._stop, sender),
            name="distrl-evaluator",
            daemon=True,  # ended with this process if it exits without `finish`
        )
        self.process.start()
        sender.close()  # the child holds the only sending end: a dead child reads as EOF

    def finish(self, timeout_s: float = FINISH_TIMEOUT_S) -> dict[str, Any]:
        self._stop.set()
        if signalled():  # SIGTERM or Ctrl-C: the child stops at once, without a last evaluation
            self.process.terminate()
            self.process.join(timeout=30)
            return {}
        result: dict[str, Any] = {"error": f"the evaluator process gave no summary within {timeout_s:.0f} s"}
        try:
            if self._results.poll(timeout_s):
                result = self._results.recv()
        except (EOFError, OSError):
            self.process.join(timeout=30)
            result = {"error": f"the evaluator process exited with code {self.process.exitcode}"}
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=30)
        if "error" in result:
            log.warning("the continuous evaluator failed: %s", result["error"])
        return result


def _prefect_api_url() -> str | None:
    """The API this process talks to: the configured one, else its embedded (ephemeral) server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        return configured
    with get_client(sync_client=True) as client:  # starts nothing: the run's server is up already
        return str(client.api_url)


def _child(params: dict[str, Any], api_url: str | None, nice: int, stop: Event, sender: Connection) -> None:
    die_with_parent()
    if nice > 0:
        os.nice(max(0, nice - os.nice(0)))
    if api_url:  # before Prefect reads its settings
        os.environ["PREFECT_API_URL"] = api_url
    # Ctrl-C reaches the whole process group: the parent decides (it terminates this process).
    # SIGTERM keeps its default (Prefect's handler, during the flow run): a dying parent's
    # SIGTERM (die_with_parent) ends this process at once, mid-evaluation or not.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from distrl_core.policy.defaults import configure_threads
    from flows.evaluator import evaluator

    configure_threads("evaluator")
    token = StopToken()

    def stop_when_asked() -> None:
        stop.wait()
        token.set()

    threading.Thread(target=stop_when_asked, name="stop-watch", daemon=True).start()
    try:
        summary = evaluator(EvaluatorParams.model_validate(params), token.id)
        sender.send({"summary": summary})
    except Exception as exc:
        sender.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        sender.close()
