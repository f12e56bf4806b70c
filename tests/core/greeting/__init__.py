"""The greeting rule: an example rule package, whole in itself (tests/core/test_add_a_rule)."""

from controller.core.context import RuleSpec
from controller.core.decisions import EventCount, Outcome

from .greeting_rule import GREET_AFTER, GREETING_MEMORY, plan_greeting
from .name import RULE

SPEC = RuleSpec(
    RULE,
    plan_greeting,
    own_memory=GREETING_MEMORY,
    settings=(GREET_AFTER,),
    events=(EventCount("greeting", frozenset({Outcome.LABEL})),),
)
