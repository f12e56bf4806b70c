"""Prometheus metrics: what the controller did, as counters an operator can alert on.

Each controller has a registry of its own (two can run in one process, as tests do).
Counters of events are fed once per cycle from its result; the lease and the policy are
read at scrape time by a collector, so they are never stale.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from controller import __version__
from controller.core.actions import Action, subject_of
from controller.core.context import RuleSpec
from controller.core.decisions import Decision, EventCount, LoggedDecision, Outcome
from controller.core.kernel.possible_gaps import possible_gaps
from controller.core.model import ClusterSnapshot
from controller.core.rules import RULES
from controller.policy import Policy, ResolvedService
from controller.runtime.lease_keeper import LeaseKeeper
from controller.runtime.policy_source import PolicySource
from controller.runtime.view_document import held_nodes

DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def event_kinds(rules: Sequence[RuleSpec] = RULES) -> tuple[str, ...]:
    """The events the rules count (`RuleSpec.events`), each once, in the rules' order."""
    return tuple(declared_events(rules))


def declared_events(rules: Sequence[RuleSpec] = RULES) -> dict[str, EventCount]:
    """Each event the rules count, by name, as first declared (its help texts)."""
    found: dict[str, EventCount] = {}
    for spec in rules:
        for count in spec.events:
            found.setdefault(count.event, count)
    return found


def event_costs(
    executed: Sequence[Action], decisions: Iterable[Decision], rules: Sequence[RuleSpec] = RULES
) -> dict[str, float]:
    """What the events the executed writes started cost, in replica-seconds, for the
    events declared with a cost."""
    costs = {c.event: 0.0 for c in declared_events(rules).values() if c.cost}
    declared = {spec.name: spec.events for spec in rules}
    subjects = {subject_of(a) for a in executed}
    for d in decisions:
        for count in declared.get(d.rule, ()):
            if count.cost and count.counts(d, executed, subjects):
                costs[count.event] += d.extra_replica_seconds
    return costs


def events_of(
    executed: Sequence[Action], decisions: Iterable[Decision], rules: Sequence[RuleSpec] = RULES
) -> dict[str, int]:
    """The events (failovers, failbacks, preemptions, task moves, ...) that the executed
    writes started, as each rule's spec declares them: by the decision's rule, outcome
    and code, never by its reason."""
    counts = dict.fromkeys(event_kinds(rules), 0)
    declared = {spec.name: spec.events for spec in rules}
    subjects = {subject_of(a) for a in executed}
    for d in decisions:
        for count in declared.get(d.rule, ()):
            if count.counts(d, executed, subjects):
                counts[count.event] += 1
    return counts


class _StateCollector(Collector):
    """The lease and the policy, read when scraped."""

    def __init__(
        self,
        policy: PolicySource,
        lease: LeaseKeeper | None,
        agents: Callable[[], int | None],
        plugin_failures: Callable[[], Mapping[str, int]],
        skipped_calls: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self._policy = policy
        self._lease = lease
        self._agents = agents
        self._plugin_failures = plugin_failures
        self._skipped_calls = skipped_calls

    def collect(self) -> Iterator[Metric]:
        build = InfoMetricFamily("placement_build", "The controller's version and Python.")
        build.add_metric([], {"version": __version__, "python": platform.python_version()})
        yield build
        failures = CounterMetricFamily(
            "placement_plugin_failures",
            "Placement plugin calls that failed or missed the deadline, by plugin.",
            labels=["plugin"],
        )
        for name, count in sorted(self._plugin_failures().items()):
            failures.add_metric([name], count)
        yield failures
        skipped = CounterMetricFamily(
            "placement_outbound_calls_skipped",
            "Calls to an agent not made because the last call to it had not ended, by call.",
            labels=["call"],
        )
        for kind, count in sorted(self._skipped_calls().items()):
            skipped.add_metric([kind], count)
        yield skipped
        reloads = CounterMetricFamily(
            "placement_policy_reloads", "Policy reloads that took effect."
        )
        reloads.add_metric([], self._policy.reloads)
        yield reloads
        errors = CounterMetricFamily(
            "placement_policy_errors", "Policy reloads rejected; the previous policy stayed."
        )
        errors.add_metric([], self._policy.errors)
        yield errors
        info = InfoMetricFamily("placement_policy", "The policy file in force.")
        info.add_metric([], {"path": str(self._policy.path or ""), "sha256": self._policy.digest})
        yield info
        agents = self._agents()
        if agents is not None:
            reporting = GaugeMetricFamily(
                "placement_agents_reporting", "Node agents whose last report is fresh."
            )
            reporting.add_metric([], agents)
            yield reporting
        yield from _lease_metrics(self._lease)


def _lease_metrics(lease: LeaseKeeper | None) -> Iterator[Metric]:
    """Whether this replica may write, and the lease as it last read it."""
    leader = GaugeMetricFamily(
        "placement_lease_leader",
        "1 while this replica may write (always 1 without a lease: a single instance).",
    )
    leader.add_metric([], 1.0 if lease is None or lease.holds() else 0.0)
    yield leader
    if lease is None:
        return
    holder = GaugeMetricFamily(
        "placement_lease_holder",
        "The lease holder as this replica last read it (1 on the holder's name).",
        labels=["lease", "holder"],
    )
    holder.add_metric([lease.config.name, lease.holder], 1.0)
    yield holder
    term = GaugeMetricFamily("placement_lease_term", "The lease's term: +1 per new holder.")
    term.add_metric([], lease.term)
    yield term
    taken = CounterMetricFamily(
        "placement_lease_acquisitions", "How often this replica became the lease holder."
    )
    taken.add_metric([], lease.acquisitions)
    yield taken
    lost = CounterMetricFamily(
        "placement_lease_losses", "How often this replica stopped holding the lease."
    )
    lost.add_metric([], lease.losses)
    yield lost


class Metrics:
    def __init__(
        self,
        policy: PolicySource,
        lease: LeaseKeeper | None,
        *,
        agents: Callable[[], int | None] = lambda: None,
        plugin_failures: Callable[[], Mapping[str, int]] = dict,
        skipped_calls: Callable[[], Mapping[str, int]] = dict,
        rules: Sequence[RuleSpec] = RULES,
    ) -> None:
        self._rules = tuple(rules)
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconcile_seconds = Histogram(
            "placement_reconcile_duration_seconds",
            "Wall time of one reconcile cycle (observe, plan, execute).",
            ["role"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.cycle_errors = Counter(
            "placement_reconcile_errors", "Cycles that failed, by cause.", ["cause"], registry=r
        )
        self.actions = Counter(
            "placement_actions", "Writes executed, by action kind.", ["kind"], registry=r
        )
        self.write_failures = Counter(
            "placement_write_failures",
            "Writes Docker refused (a 4xx that is no conflict), by action kind; the object "
            "waits and the rest of the plan goes on.",
            ["kind"],
            registry=r,
        )
        self.conflicts = Counter(
            "placement_write_conflicts",
            "Cycles ended early by a write conflict or the lease fence.",
            registry=r,
        )
        self.decisions = Counter(
            "placement_decisions",
            "Decisions made, by rule and outcome; one repeated unchanged counts once.",
            ["rule", "outcome"],
            registry=r,
        )
        events = declared_events(self._rules)
        self.events = {
            kind: Counter(f"placement_{kind}s", count.help_text, registry=r)
            for kind, count in events.items()
        }
        self.event_costs = {
            kind: Counter(f"placement_{kind}_replica_seconds", count.cost, registry=r)
            for kind, count in events.items()
            if count.cost
        }
        self.health_panic = Gauge(
            "placement_health_panic",
            "1 while the nodes reported failed or degraded, suspected or quarantined (with "
            "a service's move-offs) are more of the ready and active nodes than "
            "controller.health-panic-threshold allows: no new report is acted on.",
            registry=r,
        )
        self.health_panic_cycles = Counter(
            "placement_health_panic_cycles", "Cycles the leader ran in a health panic.", registry=r
        )
        self.suspicions = Counter(
            "placement_suspicions",
            "Ready nodes that faster signals than Swarm's heartbeat agreed were gone "
            "(core/health/suspicion), counted once per suspicion.",
            registry=r,
        )
        self.managed_services = Gauge(
            "placement_managed_services",
            "Services the controller manages (as of the last cycle).",
            registry=r,
        )
        self.nodes_held = Gauge(
            "placement_nodes_held",
            "Nodes the controller holds, by what it holds them for: paused, quarantined, "
            "failed, degraded (a health source's word it keeps), denying (a service).",
            ["mark"],
            registry=r,
        )
        self.possible_unenforced = Gauge(
            "placement_possible_owners_unenforced",
            "Tasks of a managed service running on a node that is no possible owner of it "
            "(as of the last cycle): the controller has not moved them yet; `status` and "
            "the web view say why.",
            ["service"],
            registry=r,
        )
        self.webhook_reports = Counter(
            "placement_webhook_reports",
            "Health webhook posts, by result: accepted, unauthorized, invalid, "
            "unknown-node, ambiguous-node, not-ready.",
            ["result"],
            registry=r,
        )
        r.register(_StateCollector(policy, lease, agents, plugin_failures, skipped_calls))
        self._previous: set[LoggedDecision] = set()  # compared as the log shows them
        self._suspected: set[str] = set()  # subjects suspected in the last leader cycle
        self._gap_services: set[str] = set()  # services with a possible-owner gap

    def record_state(
        self,
        snapshot: ClusterSnapshot,
        resolved: Mapping[str, ResolvedService],
        now: float,
        *,
        policy: Policy | None = None,
        decisions: Sequence[Decision] = (),
    ) -> None:
        """What the last cycle saw: managed services, the nodes held, by mark, and the
        tasks on nodes their possible owners exclude."""
        self.managed_services.set(sum(1 for r in resolved.values() if r.settings.managed))
        for mark, count in held_nodes(snapshot, now).items():
            self.nodes_held.labels(mark).set(count)
        gaps = possible_gaps(snapshot, policy or Policy.default(), resolved, decisions)
        for gap in gaps:
            self.possible_unenforced.labels(gap.service_name).set(gap.count)
        # A service that has moved, or gone, loses its series (removed one by one: a
        # scrape never sees the others vanish for a moment, which would reset an alert).
        current = {gap.service_name for gap in gaps}
        for name in self._gap_services - current:
            self.possible_unenforced.remove(name)
        self._gap_services = current

    def record_cycle(
        self,
        *,
        seconds: float,
        leader: bool,
        decisions: Sequence[Decision],
        executed: Sequence[Action],
        conflict: bool,
        failed: Sequence[Action] = (),
    ) -> None:
        self.reconcile_seconds.labels("leader" if leader else "standby").observe(seconds)
        # A panic and a suspicion are counted by their outcomes, which only health
        # assessment (core/health) decides.
        panic = leader and any(d.outcome is Outcome.PANIC for d in decisions)
        self.health_panic.set(1.0 if panic else 0.0)
        if panic:
            self.health_panic_cycles.inc()
        if not leader:
            self._previous = set()  # decisions count where they are acted on
            return
        logged = [d.logged() for d in decisions]
        for d in logged:
            if d not in self._previous:
                self.decisions.labels(d.rule, d.outcome).inc()
        self._previous = set(logged)
        # A suspect decision repeats (with a longer agreement) while the node stays
        # suspected: count each suspicion once, when it starts.
        suspected = {d.subject for d in decisions if d.outcome is Outcome.SUSPECT}
        self.suspicions.inc(len(suspected - self._suspected))
        self._suspected = suspected
        for action in executed:
            self.actions.labels(action.kind).inc()
        for action in failed:
            self.write_failures.labels(action.kind).inc()
        for kind, count in events_of(executed, decisions, self._rules).items():
            if count:
                self.events[kind].inc(count)
        for kind, cost in event_costs(executed, decisions, self._rules).items():
            if cost:
                self.event_costs[kind].inc(cost)
        if conflict:
            self.conflicts.inc()
