"""A monotonic clock the test moves by hand: injected into timing code, so it runs
exactly and without sleeping."""


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
