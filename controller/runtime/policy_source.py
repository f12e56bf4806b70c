"""The policy in force: loaded at start, reloaded on change or SIGHUP, last good kept."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from controller.adapters.policy_file import PolicyFileError, load_policy_file
from controller.core.rules import declared_settings
from controller.policy import Policy, summarize_policy_change

log = logging.getLogger(__name__)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class PolicySource:
    """Holds the current policy. `reload()` never raises: a bad file keeps the old one."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.reloads = 0
        self.errors = 0
        if path is None:
            self.policy = Policy.default(declared_settings())
            self._digest: str | None = None
        else:
            self.policy = load_policy_file(path).policy  # raises PolicyFileError at start
            self._digest = _digest(path)

    def __call__(self) -> Policy:
        return self.policy

    @property
    def digest(self) -> str:
        """The SHA-256 of the policy file as last read ("" without a file)."""
        return self._digest or ""

    def changed_on_disk(self) -> bool:
        return self.path is not None and _digest(self.path) != self._digest

    def reload(self) -> str:
        """Load the file again; return a one-line summary of what happened."""
        if self.path is None:
            return "no policy file: the defaults apply"
        self._digest = _digest(self.path)
        try:
            new = load_policy_file(self.path).policy
        except PolicyFileError as exc:
            self.errors += 1
            problems = "; ".join(exc.errors)
            return f"policy {self.path} rejected, the previous policy stays in force: {problems}"
        summary = summarize_policy_change(self.policy, new)
        self.policy = new
        self.reloads += 1
        return f"policy {self.path} reloaded: {summary}"
