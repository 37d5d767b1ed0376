"""A 300-update warm start fits every task kind's plan, set_alarm's included (60 did not).

Diagnosis (docs/performance.md, "Why set_alarm was not learned"): with 60 SFT updates the
policy never completed the 4-step alarm editor (greedy success on the alarm tasks it was
trained on was the 1 in 4 that only need an existing alarm switched on), its sampled chance of
completing the editor was ~0.3 %, so A-RIDE (sparse reward, positive advantages only) had no
success to reinforce, and a critic that overvalued the launcher taught it to press HOME instead.
"""

from __future__ import annotations

import pytest

from bench._gap_episodes import run_inspected
from distrl_core.policy import Policy
from distrl_core.policy.config import policy_config_for
from flows.train_local import TrainLocalParams
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.tasks import validation_split
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

# The budget that won on the validation split (docs/performance.md); the demo's default follows
# once its five-seed table is re-measured with it.
FITTING_UPDATES = 300


@pytest.mark.timeout(900)  # ~35 s of SFT on an idle core; a loaded machine takes several times that
def test_a_300_update_warm_start_completes_the_alarm_editor_on_its_training_tasks() -> None:
    params = TrainLocalParams()
    fit, _validation = validation_split("general")
    policy = Policy.create(policy_config_for(params.base, 0))
    warm = WarmStartConfig(family="general", updates=FITTING_UPDATES, noise=params.warm_start_noise, seed=0)
    supervised_warm_start(policy, collect_demonstrations(warm, tasks=fit).rows, warm)
    # only the alarms that need the editor: switching on an existing alarm is a 2-step plan
    editor_tasks = [
        t
        for t in fit
        if t.kind == "set_alarm" and not any(not a["enabled"] for a in t.params["setup"]["alarms"])
    ]
    env = SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.1), screenshots=False, ui_xml=False)
    episodes = run_inspected(policy, editor_tasks, [7_000_000], env)
    success = sum(e.success for e in episodes) / len(episodes)
    assert success >= 0.5, f"greedy success {success:.2f} on the trained alarm-editor tasks"
