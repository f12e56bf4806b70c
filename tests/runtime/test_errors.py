"""The controller's own errors say whether to retry, and a failed cycle is told by one check."""

from __future__ import annotations

from controller.adapters.agent_client import AgentError
from controller.adapters.agent_probe import ProbeError
from controller.adapters.docker_read import ServiceNotFoundError
from controller.adapters.engine import (
    ConflictError,
    DockerUnavailableError,
    GoneError,
    NotAManagerError,
    TransientError,
)
from controller.adapters.errors import RetryableError, TerminalError
from controller.adapters.json_client import HttpJsonError
from controller.adapters.plugins import PluginError
from controller.adapters.policy_file import PolicyFileError
from controller.adapters.snapshot_file import SnapshotFileError
from controller.adapters.start import InRolloutError, NothingToStartError
from controller.runtime.lease_keeper import NotLeaderError
from controller.runtime.loop import _cycle_failure
from controller.runtime.watcher import StreamEndedError

RETRYABLE = (
    DockerUnavailableError,
    TransientError,
    ConflictError,
    GoneError,
    NotLeaderError,
    PluginError,
    AgentError,
    ProbeError,
    HttpJsonError,
    StreamEndedError,
    InRolloutError,
)
TERMINAL = (
    NotAManagerError,
    PolicyFileError,
    SnapshotFileError,
    NothingToStartError,
    ServiceNotFoundError,
)


def test_each_error_is_retryable_or_terminal_and_never_both() -> None:
    for cls in RETRYABLE:
        assert issubclass(cls, RetryableError) and not issubclass(cls, TerminalError), cls
    for cls in TERMINAL:
        assert issubclass(cls, TerminalError) and not issubclass(cls, RetryableError), cls


def test_a_failed_cycle_is_named_by_its_error_and_anything_else_is_unexpected() -> None:
    assert _cycle_failure(DockerUnavailableError("gone")) == (
        "engine-unreachable",
        "the Docker engine is unreachable",
    )
    assert _cycle_failure(TransientError("no leader"))[0] == "swarm-error"
    assert _cycle_failure(ConflictError("out of sequence"))[0] == "conflict"
    assert _cycle_failure(NotAManagerError("worker")) == ("unexpected", "unexpectedly")
    assert _cycle_failure(KeyError("bug")) == ("unexpected", "unexpectedly")
