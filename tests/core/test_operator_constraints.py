"""A service's operator constraints are read once, when the value is made: the same as
splitting its constraints from the controller's and writing each parsed one back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.core.constraints import ConstraintError, parse_constraint
from controller.core.labels import (
    EXCLUDED_LABEL,
    exclusion_constraint,
    format_exclusions,
    operator_texts,
    possible_constraint,
    steering_constraint,
)
from controller.core.model import Service

_SPACE = st.sampled_from(["", " ", "  "])
_OPERATOR_CONSTRAINT = st.builds(
    lambda a, key, b, op, c, value, d: f"{a}{key}{b}{op}{c}{value}{d}",
    _SPACE,
    st.sampled_from(["node.role", "node.labels.zone", "node.hostname", "node.id"]),
    _SPACE,
    st.sampled_from(["==", "!="]),
    _SPACE,
    st.sampled_from(["manager", "a", "node-1", "n1", ""]),
    _SPACE,
)
_NODES = st.sets(st.sampled_from(["n1", "n2", "n3"]), max_size=3)


@given(
    operators=st.lists(_OPERATOR_CONSTRAINT | st.just("no operator"), max_size=4),
    excluded=_NODES,
    labelled=st.booleans(),
    possible=st.booleans(),
)
def test_the_operator_constraints_are_the_parsed_ones_written_back(
    operators: list[str], excluded: set[str], labelled: bool, possible: bool
) -> None:
    ours = [steering_constraint("web")] + ([possible_constraint("web")] if possible else [])
    exclusions = [exclusion_constraint(n) for n in sorted(excluded)]
    labels = {EXCLUDED_LABEL: format_exclusions(excluded)} if labelled else {}
    made = Service(
        id="s1",
        version=1,
        name="web",
        labels=labels,
        constraints=(*operators, *ours, *exclusions),
    )
    texts = operator_texts("web", labels, made.constraints)
    try:
        expected = tuple(str(parse_constraint(t)) for t in texts)
    except ConstraintError:
        # Unreadable: the owners rule skips the service; the texts are kept as written.
        assert len(made.operator_constraints) == len(texts)
        return
    assert made.operator_constraints == expected
    assert made.excluded_recorded is labelled
