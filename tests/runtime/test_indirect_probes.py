"""Indirect probes: other nodes' agents are asked, never the suspect's own; one that gets
through means alive, all that answer failing mean gone, silence says nothing."""

from __future__ import annotations

from typing import Any

from controller.adapters.agent_client import AgentError
from controller.runtime.indirect_probes import IndirectProbes


class Agents:
    secret = "s3cret"
    ca = None

    def __init__(self, points: dict[str, tuple[str, str]]) -> None:
        self.points = points

    def vantage_points(self) -> dict[str, tuple[str, str]]:
        return dict(self.points)


POINTS = {
    "http://a1:9810": ("n1", "node-1"),
    "http://a2:9810": ("n2", "node-2"),
    "http://a3:9810": ("n3", "node-3"),
    "http://a4:9810": ("n4", "node-4"),
}


def prober(answers: dict[str, bool | None], asked: list[str]):  # type: ignore[no-untyped-def]
    def probe(agent: str, address: str, *, secret: str, timeout: float, ca: object) -> bool:
        assert secret == "s3cret" and address == "10.0.0.2"
        asked.append(agent)
        answer = answers.get(agent)
        if answer is None:
            raise AgentError("no answer within 1 s")
        return answer

    return probe


def make(answers: dict[str, bool | None], asked: list[str], fanout: int = 3) -> IndirectProbes:
    agents: Any = Agents(POINTS)
    return IndirectProbes(agents, fanout=fanout, probe=prober(answers, asked))


def test_all_other_agents_failing_make_it_gone_and_its_own_agent_is_not_asked() -> None:
    asked: list[str] = []
    ask = make({"http://a1:9810": False, "http://a3:9810": False, "http://a4:9810": False}, asked)
    assert ask("n2", "10.0.0.2") == (False, "unreachable from node-1, node-3, node-4 as well")
    assert sorted(asked) == ["http://a1:9810", "http://a3:9810", "http://a4:9810"]


def test_one_agent_getting_through_makes_it_alive() -> None:
    ask = make({"http://a1:9810": False, "http://a3:9810": True}, [])
    assert ask("n2", "10.0.0.2") == (True, "reached from node-3")


def test_agents_that_do_not_answer_say_nothing() -> None:
    ask = make({"http://a4:9810": False}, [])
    assert ask("n2", "10.0.0.2") == (False, "unreachable from node-4 as well")
    assert make({}, [])("n2", "10.0.0.2") is None


def test_at_most_fanout_agents_are_asked() -> None:
    asked: list[str] = []
    make({}, asked, fanout=2)("n2", "10.0.0.2")
    assert len(asked) == 2 and "http://a2:9810" not in asked
