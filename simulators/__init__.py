"""Simulators and the loops that run the agent on them.

SimDroid (``simdroid``, ``sim_env``), the fake ADB server (``fake_adb``), the environment over an
ADB device (``adb``: a real phone or the fake server, playing SimDroid's task catalog), the
success rules that read their state (``sim_rules``, ``adb_checks``), and what drives a policy
through them: ``rollout``, ``evaluation``, ``warm_start`` and the in-process ``local_loop``.

The core (``distrl_core``: the algorithm and the agent) never imports this package; it is handed
tasks and environments as arguments.
"""
