"""The resolved policy: what the rules read, built from the file (or the defaults).

Service settings stay layered here (file `defaults`, then `services` rules); they become a
`ServiceSettings` only per service, in `resolve_service`, once labels are known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any, TypeVar

from controller.policy.rule_settings import DeclaredSettings, RuleSetting
from controller.policy.settings import ControllerSettings, NodeGroup, QuarantineSettings

STACK_LABEL = "com.docker.stack.namespace"
# Built-in levels, widest first, each read from the node label of the same name: nodes
# labelled `rack=r1` spread by rack without any configuration.
DEFAULT_FAULT_DOMAINS: Mapping[str, str] = MappingProxyType(
    {"site": "site", "rack": "rack", "chassis": "chassis"}
)


K = TypeVar("K")
V = TypeVar("V")


def frozen_mapping(items: Mapping[K, V] | None = None) -> Mapping[K, V]:
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True, slots=True)
class ServiceMatch:
    """Which services a rule applies to: every given criterion must hold (globs, fnmatch)."""

    name: str | None = None
    stack: str | None = None
    labels: tuple[tuple[str, str], ...] = ()

    def matches(self, *, service_name: str, labels: Mapping[str, str]) -> bool:
        if self.name is not None and not fnmatchcase(service_name, self.name):
            return False
        if self.stack is not None and not fnmatchcase(labels.get(STACK_LABEL, ""), self.stack):
            return False
        return all(key in labels and fnmatchcase(labels[key], glob) for key, glob in self.labels)

    def describe(self) -> str:
        parts = [f"name={self.name}"] if self.name is not None else []
        parts += [f"stack={self.stack}"] if self.stack is not None else []
        parts += [f"labels.{key}={glob}" for key, glob in self.labels]
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class ServiceRule:
    """One entry of the file's `services` list: a match and the settings it sets."""

    index: int
    match: ServiceMatch
    overrides: Mapping[str, object] = field(default_factory=frozen_mapping)

    @property
    def source(self) -> str:
        return f"file:services[{self.index}] (match {self.match.describe()})"


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the file decides. `Policy.default()` is a file holding only apiVersion."""

    controller: ControllerSettings = field(default_factory=ControllerSettings)
    # Level -> node label, widest first.
    fault_domains: Mapping[str, str] = field(default_factory=lambda: DEFAULT_FAULT_DOMAINS)
    groups: Mapping[str, NodeGroup] = field(default_factory=frozen_mapping)
    quarantine: QuarantineSettings = field(default_factory=QuarantineSettings)
    defaults: Mapping[str, object] = field(default_factory=frozen_mapping)  # setting -> value
    rules: tuple[ServiceRule, ...] = ()
    # The settings the rules declare in their own packages (policy/rule_settings).
    declared: DeclaredSettings = field(default_factory=DeclaredSettings)

    @classmethod
    def default(cls, declared: tuple[RuleSetting[Any], ...] = ()) -> Policy:
        """`declared`: the settings the rules declare (core/rules), known to labels."""
        return cls(declared=DeclaredSettings(declared))

    @property
    def fault_domain_levels(self) -> tuple[str, ...]:
        return tuple(self.fault_domains)

    def matching_rules(
        self, *, service_name: str, labels: Mapping[str, str]
    ) -> tuple[ServiceRule, ...]:
        """The rules that apply to a service, in file order (later ones win)."""
        return tuple(
            rule
            for rule in self.rules
            if rule.match.matches(service_name=service_name, labels=labels)
        )

    def describe(self) -> str:
        """A short summary for `policy check` and reload logs."""
        levels = ">".join(self.fault_domains) or "none"
        return (
            f"{len(self.rules)} service rule(s), {len(self.defaults)} default(s), "
            f"{len(self.groups)} node group(s), fault domains {levels}, "
            f"time zone {self.controller.timezone}"
        )
