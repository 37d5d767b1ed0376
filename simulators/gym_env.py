"""A gymnasium interface to SimDroid: text observations in, action text out.

The observation is a short prompt-like text (instruction, step, previous actions, the compact UI
tree); the action is action-language text such as ``tap(3)`` (see ``distrl_core.envs.actions``).
``info["observation"]`` carries the full Observation (elements, XML, screenshot).
"""

from __future__ import annotations

import io
import string
from typing import Any

import numpy as np

try:
    import gymnasium as gym
    from gymnasium import spaces
except ImportError as error:  # an optional extra: nothing but this wrapper needs gymnasium
    raise ImportError(
        "simulators.gym_env needs gymnasium, an optional extra: pip install 'distrl[gym]'"
    ) from error

from distrl_core.envs.observation import Observation
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig

__all__ = ["SimDroidGymEnv", "observation_text"]

CHARSET = frozenset(string.printable)


def _printable(text: str) -> str:
    return "".join(c if c in CHARSET else "?" for c in text)


def observation_text(obs: Observation, max_chars: int = 8192) -> str:
    previous = "; ".join(obs.previous_actions[-5:]) or "none"
    text = f"Instruction: {obs.instruction}\nStep: {obs.step}\nPrevious actions: {previous}\nScreen:\n{obs.ui_text}"
    return _printable(text)[:max_chars]


class SimDroidGymEnv(gym.Env):
    # gymnasium declares metadata an instance attribute (so no ClassVar), and reads it off the class
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}  # noqa: RUF012

    def __init__(
        self,
        config: SimDroidEnvConfig | None = None,
        render_mode: str | None = None,
        max_observation_chars: int = 8192,
        max_action_chars: int = 1024,
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        config = config or SimDroidEnvConfig()
        if render_mode is None:
            config.screenshots = False  # nothing would look at them
        self.env = SimDroidEnv(config)
        self.render_mode = render_mode
        self.max_observation_chars = max_observation_chars
        self.observation_space = spaces.Text(
            max_length=max_observation_chars, min_length=0, charset=string.printable
        )
        self.action_space = spaces.Text(max_length=max_action_chars, min_length=1, charset=string.printable)
        self._last: Observation | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        obs = self.env.reset(task, seed=seed)
        self._last = obs
        return observation_text(obs, self.max_observation_chars), {
            "observation": obs,
            "task_id": obs.extras["task_id"],
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        self._last = result.observation
        # wall-clock latency is left out so that equal seeds and actions give equal infos
        info = {k: v for k, v in result.info.as_dict().items() if k != "latency_s"}
        info["observation"] = result.observation
        terminated = result.done and not result.truncated
        text = observation_text(result.observation, self.max_observation_chars)
        return text, result.reward, terminated, result.truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self._last is None or self._last.screenshot_png is None:
            return None
        from PIL import Image

        with Image.open(io.BytesIO(self._last.screenshot_png)) as image:
            return np.asarray(image.convert("RGB"))
