"""Text boxes from a screenshot, read by a packaged, pretrained OCR model (no download, ever).

The reader is RapidOCR's ONNX build (``rapidocr-onnxruntime``): PaddleOCR's PP-OCRv4 text detector
and recogniser as ONNX files inside the wheel, run by onnxruntime on the CPU. ``make
pretrained-deps`` installs it (the ``ocr`` extra of pyproject.toml); without it
:class:`OcrReader` raises :class:`OcrUnavailable` saying so. What comes out is a list of
``distrl_core.envs.screen.TextBox`` in screenshot pixels, with each line's word spaces restored
from its characters' positions (``respace``).
"""

from __future__ import annotations

import functools
import hashlib
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from distrl_core.envs.screen import TextBox, respace

__all__ = ["OcrConfig", "OcrReader", "OcrUnavailable", "ocr_missing_reason", "shared_reader"]

INSTALL_HINT = (
    "`make pretrained-deps` installs it (rapidocr-onnxruntime, onnxruntime; no download at run time)"
)


class OcrUnavailable(RuntimeError):
    """The OCR package is not installed."""


def ocr_missing_reason() -> str | None:
    """Why the OCR cannot run here (a sentence), or None when it can."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"the screen observation needs the OCR package, which is not installed ({exc}); {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class OcrConfig:
    """Settings of the OCR model.

    - ``threads``: onnxruntime threads per model; 1, since collectors already run one process or
      thread per device on few cores, and more threads oversubscribe them.
    - ``det_side``: the detector's input is scaled so its shorter side is this many pixels (a
      multiple of 32 after rounding). The package's 736 upsamples a half-size phone screenshot
      (540 px wide) for no gain in recall at about 1.5x the detector's time.
    - ``min_score``: recognised lines below this confidence are dropped by the model.
    - ``cache_screens``: the readings of this many distinct screenshots are kept (by a hash of the
      PNG): screens recur (every General episode starts on the same launcher, a tap that does
      nothing leaves the screen as it was) and an OCR costs about 0.6 s of CPU; 0 keeps none.
    """

    threads: int = 1
    det_side: int = 544
    min_score: float = 0.5
    cache_screens: int = 512

    def __post_init__(self) -> None:
        if self.threads < 1 or self.det_side < 32 or self.cache_screens < 0:
            raise ValueError("OcrConfig.threads must be >= 1, det_side >= 32 and cache_screens >= 0")


class OcrReader:
    """Reads text boxes from PNG screenshots. Thread-safe: one model serves every environment of a
    process (an onnxruntime session per model is ~20 MB and takes ~0.2 s to load)."""

    def __init__(self, config: OcrConfig | None = None) -> None:
        self.config = config or OcrConfig()
        reason = ocr_missing_reason()
        if reason is not None:
            raise OcrUnavailable(reason)
        from rapidocr_onnxruntime import RapidOCR

        threads = self.config.threads
        self._engine: Any = RapidOCR(
            Global_use_cls=False,  # screens are upright: the angle classifier only costs time
            intra_op_num_threads=threads,
            inter_op_num_threads=threads,
            det_limit_side_len=self.config.det_side,
            text_score=self.config.min_score,
        )
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, tuple[tuple[TextBox, ...], tuple[int, int]]] = OrderedDict()

    def read(self, png: bytes) -> tuple[list[TextBox], tuple[int, int]]:
        """The text boxes of a PNG and its (width, height)."""
        key = hashlib.blake2b(png, digest_size=16).digest()
        with self._lock:  # onnxruntime sessions are thread-safe, RapidOCR's parameter updates are not
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return list(cached[0]), cached[1]
            image = Image.open(io.BytesIO(png)).convert("RGB")
            pixels = np.asarray(image)[:, :, ::-1]  # RGB -> the BGR that OpenCV-based models expect
            result, _ = self._engine(pixels, use_cls=False, return_word_box=True)
            boxes = [_text_box(line) for line in result or []]
            if self.config.cache_screens:
                self._cache[key] = (tuple(boxes), image.size)
                while len(self._cache) > self.config.cache_screens:
                    self._cache.popitem(last=False)
        return boxes, image.size


def _text_box(line: list[Any]) -> TextBox:
    quad, text, score = line[0], str(line[1]), float(line[2])
    xs = [float(p[0]) for p in quad]
    ys = [float(p[1]) for p in quad]
    # With return_word_box a line is [quad, text, score, character quads, characters, confidences].
    chars = line[4] if len(line) >= 5 else None
    char_quads = line[3] if len(line) >= 5 else None
    if isinstance(chars, list) and isinstance(char_quads, list) and len(chars) == len(char_quads):
        spans = [(min(p[0] for p in q), max(p[0] for p in q)) for q in char_quads]
        text = respace([str(c) for c in chars], spans)
    return TextBox(text, score, (min(xs), min(ys), max(xs), max(ys)))


@functools.cache
def shared_reader() -> OcrReader:
    """The process's one reader with the default config: every environment of every collector
    thread shares its model (loaded once, ~0.2 s and ~20 MB)."""
    return OcrReader()
