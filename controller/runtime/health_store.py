"""Live health reports from the webhook, kept until they lapse.

The webhook's threads put reports in; each reconcile cycle reads the ones still live.
One report per node and source: a newer one replaces the older, whatever it says.
"""

from __future__ import annotations

import threading

from controller.core.outside_inputs import HealthReport


class HealthStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[tuple[str, str], HealthReport] = {}

    def put(self, report: HealthReport) -> None:
        with self._lock:
            self._reports[(report.node_id, report.source)] = report

    def current(self, node_id: str, source: str, now: float) -> HealthReport | None:
        """The source's word in force on the node, if any."""
        with self._lock:
            report = self._reports.get((node_id, source))
        return report if report is not None and report.expires_at > now else None

    def live(self, now: float) -> tuple[HealthReport, ...]:
        """The reports that have not lapsed (lapsed ones are forgotten)."""
        with self._lock:
            for key in [k for k, r in self._reports.items() if r.expires_at <= now]:
                del self._reports[key]
            return tuple(sorted(self._reports.values(), key=lambda r: (r.node_id, r.source)))
