"""What a node agent reports (`GET /v1/report`), and how the controller reads it.

    {"node_id": "...", "hostname": "node-2", "at": 1764500000.0,
     "usage": {"cpu": 0.42, "memory": 0.61, "window": 60.0, "samples": 12, "source": "host"},
     "services": {"<service id>": {"name": "web", "running": 2, "unhealthy": 0,
                                   "unhealthy_events": 1, "restarts": 3}},
     "events": [{"task": "<task id>", "service": "<service id>", "kind": "unhealthy",
                 "at": 1764499990.5, "detail": "..."}]}

`usage` is the node's CPU and memory in use, as fractions of the node, averaged over
`window` seconds (null until the first two samples). `events` lists, within the window
kept, the times a container of a Swarm task turned unhealthy or died on its own (not
stopped or killed by Docker or Swarm); `services` sums them up per service.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from controller.core.model import NodeUsage
from controller.core.outside_inputs import WorkloadEvent, WorkloadEventKind


class _Strict(BaseModel):
    # No NaN or infinity anywhere: `at` NaN would compare false with every window, and
    # an event would never age out nor count.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class AgentUsage(_Strict):
    cpu: float = Field(ge=0, le=64)
    memory: float = Field(ge=0, le=64)
    window: float = Field(ge=0)
    samples: int = Field(ge=0)
    source: str = ""


class AgentService(_Strict):
    name: str = ""
    running: int = Field(0, ge=0)
    unhealthy: int = Field(0, ge=0)
    unhealthy_events: int = Field(0, ge=0)
    restarts: int = Field(0, ge=0)


class AgentEvent(_Strict):
    task: str = Field(min_length=1, max_length=100)
    service: str = Field(min_length=1, max_length=100)
    kind: Literal["unhealthy", "died"]
    at: float
    detail: str = Field("", max_length=500)


class AgentReport(_Strict):
    node_id: str = Field(min_length=1, max_length=100)
    hostname: str = ""
    at: float
    usage: AgentUsage | None = None
    services: dict[str, AgentService] = Field(default_factory=dict)
    events: list[AgentEvent] = Field(default_factory=list, max_length=10_000)

    def node_usage(self) -> NodeUsage | None:
        if self.usage is None or self.usage.samples < 1:
            return None
        return NodeUsage(cpu=self.usage.cpu, memory=self.usage.memory)

    def workload_events(self) -> tuple[WorkloadEvent, ...]:
        return tuple(
            WorkloadEvent(
                task_id=e.task,
                service_id=e.service,
                node_id=self.node_id,
                at=e.at,
                kind=(
                    WorkloadEventKind.UNHEALTHY
                    if e.kind == "unhealthy"
                    else WorkloadEventKind.FAILED
                ),
                detail=e.detail,
            )
            for e in self.events
        )
