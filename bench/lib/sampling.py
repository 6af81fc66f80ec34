"""Where the driver's main thread spends wall-clock time while no Spark stage runs: its stack sampled every few
milliseconds (our frames only: ``compaction/`` and ``bench/``), summed over a time window. The phase timers
(``lib/phases.py``) time named functions; this finds what they do not name (a py4j walk inside a closure)."""

from __future__ import annotations

import collections
import sys
import threading
import time
from types import FrameType

#: Path parts that mark our own frames (the rest, py4j and the standard library, is what they wait in).
OWN_PARTS = ("/compaction/", "/bench/")


def _own_frames(frame: FrameType | None) -> list[str]:
    """``module:function`` of each of our frames, innermost first."""
    out = []
    while frame is not None:
        path = frame.f_code.co_filename
        for part in OWN_PARTS:
            if part in path:
                out.append(f"{path.rsplit(part, 1)[1]}:{frame.f_code.co_name}")
                break
        frame = frame.f_back
    return out


class MainThreadSampler:
    """Samples the main thread's stack from a daemon thread while used as a context manager."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, list[str]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident

    def _run(self) -> None:
        while not self._stop.is_set():
            frame = sys._current_frames().get(self._main)  # noqa: SLF001 - the only way to see another thread's stack
            self.samples.append((time.time(), _own_frames(frame)))
            time.sleep(self.interval_s)

    def __enter__(self) -> MainThreadSampler:
        self._thread = threading.Thread(target=self._run, name="main-thread-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def inclusive(self, start: float, end: float, top: int = 12) -> list[tuple[str, float]]:
        """Seconds of the window ``[start, end)`` (epoch seconds) spent inside each of our functions (a function
        counts once per sample however deep), most first: the window's length shared out by the samples in it. The
        callers every sample of the window is in (the benchmark's own loop) are left out: they say nothing."""
        window = [frames for t, frames in self.samples if start <= t < end]
        if not window:
            return []
        per_sample = (end - start) / len(window)
        counts: collections.Counter[str] = collections.Counter()
        for frames in window:
            counts.update(set(frames))
        shown = [(name, n) for name, n in counts.most_common() if n < len(window)]
        return [(name, n * per_sample) for name, n in shown[:top]]
