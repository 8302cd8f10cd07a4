"""Stand-ins for a GPU's voice engines, loaded into the app by Python's `site` when
bench/api_lane_model.py puts this folder on the app's PYTHONPATH.

Every run of the acoustic, flow and vocoder engines sleeps a lent H100's run time for its
batch size (padded up to 1, 8 or 64), one run at a time, the GIL let go, as a device's
run would. The acoustic engine's outputs are real (each row run once on the CPU and kept,
outside the sleep: the plans and their timing are the voice's); the flow's and the
vocoder's are zeros of their shapes. LANE_POLICY says how many waiting requests a batch
takes: "measured", pipeline.infer.engine.batch_count on those times (a device engine
runs it on the times it measures alone at warm-up, which are shorter: docs/gpu.md);
"padded", every one waiting up to the largest size (what a device engine did before)."""

import os
import threading
import time

import numpy as np

from pipeline.infer import engine as engines

# How long a batch of each size took a lent H100's device lane (ms: the run, the host's
# stacking and copies, and its waits for the GIL beside 50 streams). They fit
# bench/results/gpu_h100_df05219.json's streams50 device_runs: flow 6 x 1.3 + 10 x 3.0 +
# 11 x 20.0 = 257.8 ms against its busy_ms 258.77; acoustic 3.2 + 4 x 17.8 = 74.4 against
# 74.45; vocoder 5 x 0.62 + 18 x 2.5 + 22 x 15.7 = 393.5 against 393.04.
RUN_MS = {"acoustic": {1: 3.2, 8: 5.0, 64: 17.8}, "flow": {1: 1.3, 8: 3.0, 64: 20.0},
          "vocoder": {1: 0.62, 8: 2.5, 64: 15.7}}
POLICY = os.environ["LANE_POLICY"]
_lane = threading.Lock()
_rows: dict[bytes, list[np.ndarray]] = {}


class _StandIn:
    """A session whose run sleeps the device's time for its batch."""

    def __init__(self, engine, session) -> None:
        self.engine, self.session = engine, session

    def run(self, _names, feed):
        name = self.engine.name
        first = feed[self.engine.input_names[0]]
        count = first.shape[0]
        with _lane:
            time.sleep(RUN_MS[name][next(s for s in RUN_MS[name] if s >= count)] / 1e3)
        if name == "flow":
            return [np.zeros_like(first)]
        if name == "vocoder":
            return [np.zeros((count, 1, first.shape[-1] * 256), np.float32)]
        rows = []
        for row in range(count):
            one = {k: v[row:row + 1] if v.shape[:1] == (count,) and count > 1 else v
                   for k, v in feed.items()}
            key = one[self.engine.input_names[0]].tobytes()
            if key not in _rows:
                _rows[key] = self.session.run(None, one)
            rows.append(_rows[key])
        return [np.concatenate([r[i] for r in rows]) for i in range(len(rows[0]))]


_built = engines.Engine.__init__


def _init(self, *args, **kwargs) -> None:
    _built(self, *args, **kwargs)
    if self._session is None or self.name not in RUN_MS:
        return
    self._session = _StandIn(self, self._session)
    seconds = {size: ms / 1e3 for size, ms in RUN_MS[self.name].items()}
    if POLICY == "measured":
        self.batch_count = lambda feed, waiting: engines.batch_count(waiting, seconds)
    else:
        self.batch_count = lambda feed, waiting: min(waiting, max(seconds))


engines.Engine.__init__ = _init
# The CPU queue's lanes as the device's: one.
engines._CPU_QUEUE.lanes = 1
