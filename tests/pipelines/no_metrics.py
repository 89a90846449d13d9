"""`NoMetrics`: a stand-in for Beam's `Metrics` whose counters count nothing, as on a runner without
committed metrics (patched over a job module's `Metrics` in tests)."""


class _NoCounter:
    def inc(self, n=1):
        del n


class NoMetrics:
    """Hands out counters that count nothing.

    Example:
        >>> monkeypatch.setattr(pretraining_data, "Metrics", NoMetrics)  # doctest: +SKIP
    """

    @staticmethod
    def counter(namespace, name):
        del namespace, name
        return _NoCounter()
