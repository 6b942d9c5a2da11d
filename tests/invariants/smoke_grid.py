"""The brute force the smoke-screen replays are compared with: every target sample at every 0.02 s step, on clouds
placed at random near the missiles' sight lines (the whole-target replay in ``tests/anchors/test_smoke_screen.py``,
the seed's in ``tests/invariants/test_seed_penalties.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anchorage.invariants.replays import smoke_screen as smoke

TARGET_CENTRE = np.array([0.0, 200.0, 5.0])


def hidden_samples(cloud: smoke._Cloud, samples: Any) -> tuple[Any, Any]:
    """The cloud's grid times (every 0.02 s from its burst until 20 s after it or its missile's arrival, whichever
    is first) and, per time and sample (``samples``: an (n, 3) array), whether the cloud's centre is within
    ``CLOUD_R`` of the segment from the missile to the sample."""
    m0 = np.array(smoke.MISSILE_STARTS[cloud.missile], dtype=float)
    arrival = float(np.linalg.norm(m0)) / smoke.MISSILE_SPEED
    t = np.arange(cloud.burst_t, min(cloud.burst_t + 20.0, arrival), smoke.REPLAY_DT)
    missile = m0 - np.outer(t, m0 / np.linalg.norm(m0)) * smoke.MISSILE_SPEED
    centre = np.array([cloud.x, cloud.y, cloud.z]) - np.outer(t - cloud.burst_t, [0.0, 0.0, smoke.SINK])
    u = samples[None] - missile[:, None]
    w = (centre - missile)[:, None]
    s = np.clip(np.sum(w * u, axis=-1) / np.sum(u * u, axis=-1), 0.0, 1.0)
    return t, np.sum((w - s[..., None] * u) ** 2, axis=-1) <= smoke.CLOUD_R**2


def grid_counts(clouds: list[smoke._Cloud], times_of: Callable[[smoke._Cloud], Any]) -> tuple[list[int], dict[str, int]]:
    """What a replay must return for ``clouds``: per cloud the number of its hidden grid times (``times_of``), per
    missile the number of distinct 0.02 s slots (``round(t / 0.02)``) among its clouds' hidden times."""
    times = [times_of(c) for c in clouds]
    slots = {m: {round(float(x) / smoke.REPLAY_DT) for c, t in zip(clouds, times, strict=True) if c.missile == m
                 for x in t}
             for m in smoke.MISSILES}
    return [len(t) for t in times], {m: len(s) for m, s in slots.items()}


def random_clouds(rng: np.random.Generator, count: int, spread: float) -> list[smoke._Cloud]:
    """Clouds whose centre is near a missile's sight line to the target at a random time, off it by a normal
    ``spread`` metres along each axis (so most of them hide the target for a while, some only partly or not at all)."""
    clouds = []
    for _ in range(count):
        missile = str(rng.choice(smoke.MISSILES))
        m0 = np.array(smoke.MISSILE_STARTS[missile], dtype=float)
        at = rng.uniform(1.0, 60.0)
        seen_from = m0 - m0 / np.linalg.norm(m0) * smoke.MISSILE_SPEED * at
        point = seen_from + rng.uniform(0.02, 0.98) * (TARGET_CENTRE - seen_from) + rng.normal(0.0, spread, 3)
        burst = round(at - rng.uniform(0.0, 20.0), int(rng.choice([1, 3, 6])))
        x, y, z = point + np.array([0.0, 0.0, smoke.SINK * (at - burst)])
        clouds.append(smoke._Cloud(missile, burst, float(x), float(y), float(z)))
    return clouds
