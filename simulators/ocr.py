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
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from distrl_core.envs.screen import TextBox, respace
from distrl_core.envs.screen_widgets import WidgetBox, find_widgets
from simulators.ocr_bands import Pixels, band_key, text_bands, to_stride, with_margin

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
    - ``det_side``: a screenshot whose shorter side is longer than this is scaled down to it for
      the detector (the package's 736 upsamples a half-size phone screenshot, 540 px wide, for no
      gain in recall at about 1.5x the detector's time); a smaller one is read at its own scale.
      Recognition always reads full-resolution crops. Going below 544 on 540 px screenshots was
      measured (60 screens, 553 elements): 384 kept every element, 448 lost 2.
    - ``band_gap``: the screenshot is read band by band (``simulators.ocr_bands``), split where at
      least this many rows of one colour lie between two bands (fewer could cut a text line whose
      glyphs leave a flat row, such as ``=``).
    - ``band_margin``: rows of the band's background colour put above and below it for the
      detector (in the detector's pixels): its boxes reach about 0.8 of a line's height past the
      text, which a margin must hold.
    - ``min_score``: recognised lines below this confidence are dropped by the model.
    - ``cache_screens``: the readings of this many distinct screenshots are kept (by a hash of the
      PNG, of the pixels, or the caller's key for them: ``OcrReader.read_pixels``): screens recur (every General episode starts on the same launcher, a tap that does
      nothing leaves the screen as it was) and an OCR costs about 0.6 s of CPU; 0 keeps none.
    - ``cache_crops``: the recognitions of this many distinct text-line crops are kept (by a hash
      of the crop's pixels and shape): a new screen mostly shows lines an earlier one showed (a
      page's title, its buttons, the same list scrolled), so it pays the detector and only its new
      lines' recognition; 0 keeps none.
    - ``cache_bands``: the readings (detection and recognition) of this many distinct bands are
      kept (by a hash of the band's pixels): a changed screen pays only for the bands it did not
      show before (the previous screen's unchanged rows, a shared title bar, a list scrolled);
      0 keeps none.
    """

    threads: int = 1
    det_side: int = 544
    min_score: float = 0.5
    cache_screens: int = 512
    cache_crops: int = 8192
    band_gap: int = 4
    band_margin: int = 16
    cache_bands: int = 8192

    def __post_init__(self) -> None:
        if self.threads < 1 or self.det_side < 32 or self.band_gap < 1 or self.band_margin < 0:
            raise ValueError("OcrConfig.threads and band_gap must be >= 1, det_side >= 32, band_margin >= 0")
        if min(self.cache_screens, self.cache_crops, self.cache_bands) < 0:
            raise ValueError("OcrConfig.cache_screens, cache_crops and cache_bands must be >= 0")


class OcrReader:
    """Reads text boxes from screenshots, PNG files or pixel arrays. Thread-safe: one model serves every environment of a
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
        self._bands: OrderedDict[tuple[bytes, float], tuple[TextBox, ...]] = OrderedDict()  # in band pixels
        # The widgets (``read_screen``) of a screen, by its key and the status bar's fraction.
        # A screen's widgets and the text boxes read in its fields after them (``_read_fields``).
        self._widgets: OrderedDict[tuple[bytes, float], tuple[tuple[WidgetBox, ...], tuple[TextBox, ...]]] = (
            OrderedDict()
        )
        self.bands_read = 0  # bands run through the detector (the rest came from the band cache)
        self.recognised = 0  # crops run through the recogniser (the rest came from the crop cache)
        self.screen_hits = 0  # reads answered whole by the screen cache

    def read(self, png: bytes) -> tuple[list[TextBox], tuple[int, int]]:
        """The text boxes of a PNG and its (width, height)."""
        return self._read(*_png_source(png))

    def read_screen(
        self,
        png: bytes | None = None,
        *,
        pixels: Pixels | Callable[[], Pixels] | None = None,
        key: bytes | None = None,
        widgets_below: float | None = None,
    ) -> tuple[list[TextBox], tuple[int, int], tuple[WidgetBox, ...]]:
        """:meth:`read` of ``png``, else :meth:`read_pixels` of ``pixels`` (and ``key``), and the
        screen's textless widgets (``distrl_core.envs.screen_widgets``) below the top
        ``widgets_below`` fraction of it (the status bar); None detects none. The widgets are
        cached by the same screen key, and the screen is decoded or drawn at most once for both."""
        if png is not None:
            screen_key, source = _png_source(png)
        elif pixels is not None:
            screen_key, source = self._pixels_source(pixels, key)
        else:
            raise ValueError("OcrReader.read_screen needs a PNG or pixels")
        once = functools.cache(source)
        boxes, size = self._read(screen_key, once)
        if widgets_below is None:
            return boxes, size, ()
        found_key = (screen_key, widgets_below)
        with self._lock:
            cached = self._widgets.get(found_key)
        if cached is None:
            top = int(widgets_below * size[1])
            found = tuple(find_widgets(once(), [box.box for box in boxes], top=top))
            # A field's value the detector passed over ("9"), read by the recogniser alone; then
            # the widgets again, so the field holding it is that text's element (and its caret's).
            extra = self._read_fields(once(), found)
            if extra:
                found = tuple(find_widgets(once(), [box.box for box in boxes + list(extra)], top=top))
            cached = (found, extra)
            with self._lock:
                _remember(self._widgets, found_key, cached, self.config.cache_screens)
        return boxes + list(cached[1]), size, cached[0]

    def _read_fields(self, bgr: Pixels, widgets: tuple[WidgetBox, ...]) -> tuple[TextBox, ...]:
        """Text boxes of what empty-looking fields hold (``WidgetBox.unread``: the ink with a
        margin, up to the caret), read by the recogniser alone (a crop the detector never made: it
        passes over a lone character); readings below ``min_score`` or empty are dropped."""
        out: list[TextBox] = []
        for widget in widgets:
            if widget.kind != "field" or widget.unread is None:
                continue
            x1, y1, x2, y2 = widget.unread
            crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
            with self._lock:
                ((text, score, _),) = self._recognise([crop])
            text = " ".join(str(text).split())
            if text and score >= self.config.min_score:
                out.append(TextBox(text, score, (float(x1), float(y1), float(x2), float(y2))))
        return tuple(out)

    def read_pixels(
        self, pixels: Pixels | Callable[[], Pixels], key: bytes | None = None
    ) -> tuple[list[TextBox], tuple[int, int]]:
        """The text boxes of a screenshot given as pixels, (height, width, 3) RGB uint8 (a fourth
        channel, RGBA's alpha, is ignored), and its (width, height): exactly what :meth:`read`
        returns for the same pixels encoded as a PNG, with no PNG encoded or decoded.

        ``key``, where the caller has one, identifies the pixels exactly (equal keys, equal pixels:
        ``SimDroid.screen_key``) and is the whole-screen cache's key, so a screen seen before costs
        no pass over its pixels, and ``pixels`` may then be a function that returns them, called
        only when the key is not cached (the screen is not even drawn); without a key the pixels
        are hashed."""
        return self._read(*self._pixels_source(pixels, key))

    def _pixels_source(
        self, pixels: Pixels | Callable[[], Pixels], key: bytes | None
    ) -> tuple[bytes, Callable[[], Pixels]]:
        """The screen cache's key of ``pixels`` and a function that returns them as BGR."""
        if key is not None:  # its own namespace: a caller's key never meets a hash of pixels or a PNG
            key = hashlib.blake2b(key, digest_size=16, person=b"caller screen").digest()
        elif callable(pixels):
            raise ValueError("OcrReader.read_pixels takes a function for the pixels only with a key")
        else:
            key = band_key(pixels[:, :, :3])

        def bgr() -> Pixels:
            rgb = pixels() if callable(pixels) else pixels
            # The models read OpenCV's BGR, the order _decode gives: channels reversed, laid out anew.
            return np.ascontiguousarray(rgb[:, :, 2::-1])

        return key, bgr

    def _read(self, key: bytes, bgr: Callable[[], Pixels]) -> tuple[list[TextBox], tuple[int, int]]:
        """The screen cached under ``key``, else ``bgr()``'s pixels read and remembered under it."""
        with self._lock:  # onnxruntime sessions are thread-safe, RapidOCR's parameter updates are not
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self.screen_hits += 1
                return list(cached[0]), cached[1]
            pixels = bgr()
            size = (pixels.shape[1], pixels.shape[0])
            boxes = self._ocr(pixels)
            _remember(self._cache, key, (tuple(boxes), size), self.config.cache_screens)
        return boxes, size

    def _ocr(self, pixels: np.ndarray[Any, Any]) -> list[TextBox]:
        """The screenshot's bands (``simulators.ocr_bands``), each read from the band cache where its
        pixels were read before, else by :meth:`_read_band`; boxes moved to the band's place."""
        height = pixels.shape[0]
        scale = min(1.0, self.config.det_side / min(pixels.shape[:2]))
        boxes: list[TextBox] = []
        for top, bottom in text_bands(pixels, self.config.band_gap):
            band = pixels[top:bottom]
            key = (band_key(band), scale)
            found = self._bands.get(key)
            if found is None:
                found = self._read_band(band, scale)
                self.bands_read += 1
            _remember(self._bands, key, found, self.config.cache_bands)
            for box in found:
                x1, y1, x2, y2 = box.box
                # A box's margin may reach past the screen where a band touches its edge.
                place = (x1, max(0.0, y1 + top), x2, min(float(height), y2 + top))
                boxes.append(TextBox(box.text, box.score, place, box.spans))
        return boxes

    def _read_band(self, band: np.ndarray[Any, Any], scale: float) -> tuple[TextBox, ...]:
        """One band read as RapidOCR's pipeline (``RapidOCR.__call__`` of rapidocr-onnxruntime 1.4.x,
        no angle classifier) reads a screen, taken apart: the detector runs on the band with a
        margin of its background, at the screenshot's scale down to ``det_side`` (never up: the
        package would scale a 60-row band to 544 rows), the recogniser on full-resolution crops
        not read before. Boxes are in the band's pixels."""
        engine = self._engine
        detector = engine.text_det
        margin = math.ceil(self.config.band_margin / scale)
        tall = with_margin(band, margin)
        small = tall
        if scale < 1.0:
            size = (round(tall.shape[1] * scale), max(1, round(tall.shape[0] * scale)))
            # BOX: an area average, no ringing
            small = np.asarray(Image.fromarray(tall).resize(size, Image.Resampling.BOX))
        det_in = to_stride(np.ascontiguousarray(small))
        prepare = detector.get_preprocess(max(det_in.shape[:2]))
        tensor = np.expand_dims(prepare.permute(prepare.normalize(det_in)), axis=0).astype(np.float32)
        found, _ = detector.postprocess_op(detector.infer(tensor)[0], det_in.shape[:2])
        found = detector.filter_tag_det_res(found, small.shape[:2])
        if len(found) == 0:
            return ()
        quads = (np.array(engine.sorted_boxes(found), dtype=np.float32) / np.float32(scale)).astype(
            np.float32
        )
        crops = engine.get_crop_img_list(tall, list(quads))
        lines = engine.cal_rec_boxes(crops, list(quads), self._recognise(crops))
        shift = np.array([0.0, margin], dtype=np.float32)
        return tuple(
            _text_box([(quad - shift).tolist(), *line])
            for quad, line in zip(quads, lines, strict=True)
            if float(line[1]) >= self.config.min_score
        )

    def _recognise(self, crops: list[np.ndarray[Any, Any]]) -> list[tuple[str, float, list[Any]]]:
        """Each crop's recognition, from the crop cache where its pixels were read before.

        A crop is recognised alone, never batched: a batch pads its crops to the widest, which
        shifts the scores and character columns of the others, so a reading would depend on its
        neighbours and a cached one could differ from a fresh one; alone it is a function of the
        crop's pixels (and on one core no slower: no padding is computed)."""
        keys = [band_key(crop) for crop in crops]
        found = {k: self._crops[k] for k in keys if k in self._crops}
        for crop, k in zip(crops, keys, strict=True):
            if k not in found:
                ((text, score, columns),), _ = self._engine.text_rec([crop], True)
                self.recognised += 1
                found[k] = (str(text), float(score), columns)
        for k in keys:
            _remember(self._crops, k, found[k], self.config.cache_crops)
        # cal_rec_boxes rewrites the word columns in place: hand it copies, never the cached lists.
        return [(found[k][0], found[k][1], copy.deepcopy(found[k][2])) for k in keys]


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """``value`` as the newest entry of the least-recently-used ``cache``, which keeps at most
    ``limit`` entries (0: none)."""
    if limit:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > limit:
            cache.popitem(last=False)


def _png_source(png: bytes) -> tuple[bytes, Callable[[], Pixels]]:
    """The screen cache's key of a PNG and a function that decodes it to BGR."""
    return hashlib.blake2b(png, digest_size=16).digest(), lambda: _decode(png)


def _decode(png: bytes) -> np.ndarray[Any, Any]:
    """A PNG's pixels as OpenCV's BGR, the order the models read. OpenCV (a dependency of the OCR
    package) decodes a SimDroid screenshot ~5x faster than Pillow; a PNG it cannot read (a
    truncated frame) goes through Pillow, which reads what it can or raises."""
    pixels = importlib.import_module("cv2").imdecode(np.frombuffer(png, np.uint8), 1)  # 1: IMREAD_COLOR
    if pixels is None:
        pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))[:, :, ::-1]
    return np.ascontiguousarray(pixels)


def _text_box(line: list[Any]) -> TextBox:
    quad, text, score = line[0], str(line[1]), float(line[2])
    xs = [float(p[0]) for p in quad]
    ys = [float(p[1]) for p in quad]
    # With return_word_box a line is [quad, text, score, character quads, characters, confidences].
    chars = line[4] if len(line) >= 5 else None
    char_quads = line[3] if len(line) >= 5 else None
    kept: tuple[tuple[float, float], ...] = ()
    if isinstance(chars, list) and isinstance(char_quads, list) and len(chars) == len(char_quads):
        spans = [(float(min(p[0] for p in q)), float(max(p[0] for p in q))) for q in char_quads]
        text = respace([str(c) for c in chars], spans)
        # Respacing only adds or drops spaces: the other characters keep their spans, in order.
        kept = tuple(span for c, span in zip(chars, spans, strict=True) if str(c).strip())
        if len(kept) != sum(not c.isspace() for c in text):
            kept = ()
    return TextBox(text, score, (min(xs), min(ys), max(xs), max(ys)), kept)


@functools.cache
def shared_reader() -> OcrReader:
    """The process's one reader with the default config: every environment of every collector
    thread shares its model (loaded once, ~0.2 s and ~20 MB)."""
    return OcrReader()
