"""Rule-based success for SimDroid: the device's own state check (like AndroidWorld's ``is_successful``).

Exact and free, so it is the evaluator to use on the simulator; the model judge exists for real
devices and for measuring how far a judge agrees with ground truth.
"""

from __future__ import annotations

from typing import Any, Protocol

from distrl_core.evaluators.base import EpisodeContext, EvalResult, Verdict


class StateCheckingDevice(Protocol):
    """What this evaluator needs from a device: SimDroid satisfies it."""

    def check_online(self) -> None: ...

    def is_successful(self, task: Any) -> bool: ...


class SimStateEvaluator:
    """Asks the device whether its state satisfies the task.

    The device comes from ``EpisodeContext.device``, or from the constructor for a collector bound to one
    device. A device that is offline (fault injection) gives ``UNKNOWN``: the state could not be read.
    """

    source = "sim_rules"

    def __init__(self, device: StateCheckingDevice | None = None) -> None:
        self.device = device

    def __repr__(self) -> str:
        return f"SimStateEvaluator(device={self.device!r})"

    def evaluate(self, context: EpisodeContext) -> EvalResult:
        # Imported here so that importing the evaluators package does not load the simulator.
        from simulators.simdroid.device import DeviceOffline
        from simulators.simdroid.success import UNRECOGNISED_KIND

        device = context.device if context.device is not None else self.device
        if device is None:
            raise ValueError(
                "SimStateEvaluator has no device: pass EpisodeContext(device=<SimDroid>) or "
                "SimStateEvaluator(device=<SimDroid>)."
            )
        task = context.task
        if task is None:
            raise ValueError("SimStateEvaluator needs the task: pass EpisodeContext(task=<Task>).")
        task_name = getattr(task, "task_id", None) or type(task).__name__
        if getattr(task, "kind", None) == UNRECOGNISED_KIND:
            why = task.params.get("unrecognised") or "SimDroid's rules check only the tasks they can read"
            return EvalResult(Verdict.UNKNOWN, f"no verdict possible for this text: {why}", self.source)
        try:
            # Like a state query over ADB, the check fails while the fault model has the device offline.
            device.check_online()
            done = device.is_successful(task)
        except DeviceOffline as exc:
            return EvalResult(Verdict.UNKNOWN, f"device offline, state not readable: {exc}", self.source)
        kind = getattr(task, "kind", "task")
        if done:
            return EvalResult(Verdict.SUCCESS, f"{kind} check passed for {task_name}", self.source)
        return EvalResult(Verdict.FAILURE, f"{kind} check failed for {task_name}", self.source)
