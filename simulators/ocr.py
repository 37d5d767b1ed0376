"""Text boxes from a screenshot, read by a packaged, pretrained OCR model (no download, ever).

The reader is RapidOCR's ONNX build (``rapidocr-onnxruntime``): PaddleOCR's PP-OCRv4 text detector
and recogniser as ONNX files inside the wheel, run by onnxruntime on the CPU. ``make
pretrained-deps`` installs it (the ``ocr`` extra of pyproject.toml); without it
:class:`OcrReader` raises :class:`OcrUnavailable` saying so. What comes out is a list of
``distrl_core.envs.screen.TextBox`` in screenshot pixels, with each line's word spaces restored
from its characters' positions (``respace``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
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


def _rapidocr() -> Any:
    """The OCR package's module, imported by name: it is an extra that `make venv` leaves out, so
    mypy, which `make lint` runs on that venv, must never see an import of it."""
    return importlib.import_module("rapidocr_onnxruntime")


def ocr_missing_reason() -> str | None:
    """Why the OCR cannot run here (a sentence), or None when it can."""
    try:
        _rapidocr()
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
      (540 px wide) for no gain in recall at about 1.5x the detector's time. A larger screenshot
      is scaled down to it (the package only scales up); recognition always reads full-resolution
      crops. Going below 544 on 540 px screenshots was measured (60 screens, 553 elements): 384
      kept every element, 448 lost 2, and the detector's time fell only ~15 % on loaded cores.
    - ``min_score``: recognised lines below this confidence are dropped by the model.
    - ``cache_screens``: the readings of this many distinct screenshots are kept (by a hash of the
      PNG): screens recur (every General episode starts on the same launcher, a tap that does
      nothing leaves the screen as it was) and an OCR costs about 0.6 s of CPU; 0 keeps none.
    - ``cache_crops``: the recognitions of this many distinct text-line crops are kept (by a hash
      of the crop's pixels and shape): a new screen mostly shows lines an earlier one showed (a
      page's title, its buttons, the same list scrolled), so it pays the detector and only its new
      lines' recognition; 0 keeps none.
    """

    threads: int = 1
    det_side: int = 544
    min_score: float = 0.5
    cache_screens: int = 512
    cache_crops: int = 8192

    def __post_init__(self) -> None:
        if self.threads < 1 or self.det_side < 32 or min(self.cache_screens, self.cache_crops) < 0:
            raise ValueError(
                "OcrConfig.threads must be >= 1, det_side >= 32, cache_screens and cache_crops >= 0"
            )


class OcrReader:
    """Reads text boxes from PNG screenshots. Thread-safe: one model serves every environment of a
    process (an onnxruntime session per model is ~20 MB and takes ~0.2 s to load)."""

    def __init__(self, config: OcrConfig | None = None) -> None:
        self.config = config or OcrConfig()
        reason = ocr_missing_reason()
        if reason is not None:
            raise OcrUnavailable(reason)
        RapidOCR = _rapidocr().RapidOCR

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
        # A crop's recognition as the recogniser returns it: (text, score, word columns).
        self._crops: OrderedDict[bytes, tuple[str, float, list[Any]]] = OrderedDict()
        self.recognised = 0  # crops run through the recogniser (the rest came from the crop cache)

    def read(self, png: bytes) -> tuple[list[TextBox], tuple[int, int]]:
        """The text boxes of a PNG and its (width, height)."""
        key = hashlib.blake2b(png, digest_size=16).digest()
        with self._lock:  # onnxruntime sessions are thread-safe, RapidOCR's parameter updates are not
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return list(cached[0]), cached[1]
            image = Image.open(io.BytesIO(png)).convert("RGB")
            boxes = self._ocr(image)
            if self.config.cache_screens:
                self._cache[key] = (tuple(boxes), image.size)
                while len(self._cache) > self.config.cache_screens:
                    self._cache.popitem(last=False)
        return boxes, image.size

    def _ocr(self, image: Image.Image) -> list[TextBox]:
        """RapidOCR's own pipeline (``RapidOCR.__call__`` of rapidocr-onnxruntime 1.4.x, no angle
        classifier) taken apart: the detector runs on the screenshot scaled down to ``det_side``
        (the package only scales up), the recogniser on full-resolution crops not read before."""
        engine = self._engine
        pixels = np.ascontiguousarray(np.asarray(image)[:, :, ::-1])  # RGB -> OpenCV's BGR
        scale = min(1.0, self.config.det_side / min(image.size))
        small = image
        if scale < 1.0:
            size = (round(image.width * scale), round(image.height * scale))
            small = image.resize(size, Image.Resampling.BOX)  # BOX: an area average, no ringing
        det_pixels = np.ascontiguousarray(np.asarray(small)[:, :, ::-1])
        img, ratio_h, ratio_w = engine.preprocess(det_pixels)
        record: dict[str, Any] = {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}}
        img, record = engine.maybe_add_letterbox(img, record)
        dt_boxes, _ = engine.auto_text_det(img)
        if dt_boxes is None:
            return []
        quads = engine._get_origin_points(dt_boxes, record, small.height, small.width)
        quads = (quads * np.float32(image.width / small.width)).astype(np.float32)
        crops = engine.get_crop_img_list(pixels, list(quads))
        lines = engine.cal_rec_boxes(crops, list(quads), self._recognise(crops))
        return [
            _text_box([quad.tolist(), *line])
            for quad, line in zip(quads, lines, strict=True)
            if float(line[1]) >= self.config.min_score
        ]

    def _recognise(self, crops: list[np.ndarray[Any, Any]]) -> list[tuple[str, float, list[Any]]]:
        """Each crop's recognition, from the crop cache where its pixels were read before.

        A crop is recognised alone, never batched: a batch pads its crops to the widest, which
        shifts the scores and character columns of the others, so a reading would depend on its
        neighbours and a cached one could differ from a fresh one; alone it is a function of the
        crop's pixels (and on one core no slower: no padding is computed)."""
        keys = [_crop_key(crop) for crop in crops]
        found = {k: self._crops[k] for k in keys if k in self._crops}
        for crop, k in zip(crops, keys, strict=True):
            if k not in found:
                ((text, score, columns),), _ = self._engine.text_rec([crop], True)
                self.recognised += 1
                found[k] = (str(text), float(score), columns)
        if self.config.cache_crops:
            for k in keys:
                self._crops[k] = found[k]
                self._crops.move_to_end(k)
            while len(self._crops) > self.config.cache_crops:
                self._crops.popitem(last=False)
        # cal_rec_boxes rewrites the word columns in place: hand it copies, never the cached lists.
        return [(found[k][0], found[k][1], copy.deepcopy(found[k][2])) for k in keys]


def _crop_key(crop: np.ndarray[Any, Any]) -> bytes:
    # The shape is part of the key: the same bytes laid out in another width are another image.
    data = np.ascontiguousarray(crop)
    return hashlib.blake2b(data.tobytes(), digest_size=16, person=repr(data.shape).encode()[:16]).digest()


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
