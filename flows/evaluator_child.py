"""The embedded evaluator's own process (started by flows/embedded_evaluator.py, not by hand):

    python -m flows.evaluator_child PARAMS_JSON RESULT_PATH

It scores versions as the `evaluator` flow does until its stdin reaches end of file (the parent
asks it to stop, or is gone), then scores the newest version and writes its summary to RESULT_PATH
(a pickle, so report keys stay integers). The parent has set its niceness, its death signal and
the Prefect API address before this interpreter started.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    params_json, result_path = argv if argv is not None else sys.argv[1:]
    # Ctrl-C reaches the whole process group: the parent decides (it terminates this process).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from distrl_core.policy.defaults import configure_threads
    from flows.evaluator import evaluator
    from tasks.evaluator import EvaluatorParams
    from tasks.stop import StopToken

    configure_threads("evaluator")
    token = StopToken()

    def stop_at_end_of_input() -> None:
        sys.stdin.read()
        token.set()

    threading.Thread(target=stop_at_end_of_input, name="stop-watch", daemon=True).start()
    outcome: dict[str, object]
    try:
        outcome = {"summary": evaluator(EvaluatorParams.model_validate_json(params_json), token.id)}
    except Exception as exc:  # the parent reports it; the training run goes on without its curve
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    partial = Path(f"{result_path}.partial")
    partial.write_bytes(pickle.dumps(outcome))
    os.replace(partial, result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
