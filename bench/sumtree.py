"""An in-memory numpy sum-tree: the reference limit the DuckDB sampler is compared with."""

from __future__ import annotations

import numpy as np


class SumTree:
    """Complete binary tree over `capacity` leaves stored in one array; leaf i lives at capacity-1+i."""

    def __init__(self, weights: np.ndarray) -> None:
        self.capacity = 1 << int(np.ceil(np.log2(max(2, len(weights)))))
        self.tree = np.zeros(2 * self.capacity - 1)
        self.tree[self.capacity - 1 : self.capacity - 1 + len(weights)] = weights
        for level_start in self._levels_bottom_up():
            # parents of this level: sum pairs of children
            start, stop = level_start
            children = self.tree[2 * start + 1 : 2 * stop + 1]
            self.tree[start:stop] = children[0::2] + children[1::2]

    def _levels_bottom_up(self) -> list[tuple[int, int]]:
        levels = []
        size = self.capacity // 2
        while size >= 1:
            levels.append((size - 1, 2 * size - 1))
            size //= 2
        return levels

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(n) * self.tree[0]
        idx = np.zeros(n, dtype=np.int64)
        while True:
            left = 2 * idx + 1
            if left[0] >= len(self.tree):
                return idx - (self.capacity - 1)
            go_right = u > self.tree[left]
            u = np.where(go_right, u - self.tree[left], u)
            idx = np.where(go_right, left + 1, left)

    def update(self, leaves: np.ndarray, weights: np.ndarray) -> None:
        idx = leaves + self.capacity - 1
        self.tree[idx] = weights
        idx = np.unique((idx - 1) // 2)
        while True:
            self.tree[idx] = self.tree[2 * idx + 1] + self.tree[2 * idx + 2]
            if idx[0] == 0 and len(idx) == 1:
                return
            idx = np.unique((idx - 1) // 2)
