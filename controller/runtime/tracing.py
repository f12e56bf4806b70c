"""OpenTelemetry set-up and the decision log.

One span per reconcile with observe / plan / execute children and a span per action;
every decision is a span event on the plan span and one logfmt (or JSON) line on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Literal, TextIO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from controller import __version__
from controller.core.decisions import Decision, LoggedDecision, Outcome

Exporter = Literal["none", "console", "otlp"]
LogFormat = Literal["logfmt", "json"]

TRACER_NAME = DEFAULT_SERVICE_NAME = "swarm-placement"


def resource_attributes(
    instance: str | None, env: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Ours, under OpenTelemetry's own variables: OTEL_SERVICE_NAME and a service.name in
    OTEL_RESOURCE_ATTRIBUTES win over the default name (the SDK adds the variables)."""
    attributes = {"service.version": __version__}
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    if not named:
        attributes["service.name"] = DEFAULT_SERVICE_NAME
    if instance:
        # One per replica (the lease holder's name): a trace says which replica led.
        attributes["service.instance.id"] = instance
    return attributes


def otlp_protocol(env: Mapping[str, str] = os.environ) -> str:
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )


def _otlp_exporter() -> SpanExporter:
    """gRPC or HTTP as OTEL_EXPORTER_OTLP_PROTOCOL says; endpoint and headers from the
    standard OTEL_* variables too."""
    protocol = otlp_protocol()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter as GrpcExporter,
            )

            return GrpcExporter()
        if protocol in ("http/protobuf", "http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter as HttpExporter,
            )

            return HttpExporter()
    except ImportError as exc:  # an optional extra
        raise RuntimeError("the OTLP exporter needs `pip install swarm-placement[otlp]`") from exc
    raise RuntimeError(
        f"OTLP protocol {protocol!r} is not supported: use grpc or http/protobuf "
        "(OTEL_EXPORTER_OTLP_PROTOCOL)"
    )


def make_tracer_provider(
    exporter: Exporter, *, extra: Iterable[SpanProcessor] = (), instance: str | None = None
) -> TracerProvider:
    """A provider of our own (not the global one), so tests can run several side by side."""
    provider = TracerProvider(resource=Resource.create(resource_attributes(instance)))
    if exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    elif exporter == "otlp":
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
    for processor in extra:
        provider.add_span_processor(processor)
    return provider


def get_tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer(TRACER_NAME, __version__)


def record_decision(span: trace.Span, decision: Decision) -> None:
    attributes = {
        "placement.rule": decision.rule,
        "placement.subject": decision.subject,
        "placement.outcome": str(decision.outcome),  # a plain str for any exporter
        "placement.reason": decision.reason,
    }
    if decision.action_text is not None:
        attributes["placement.action"] = decision.action_text
    span.add_event("decision", attributes)


def _logfmt_value(value: str) -> str:
    if value and all(ch.isalnum() or ch in "-_./:+" for ch in value):
        return value
    return json.dumps(value)


class DecisionLog:
    """Writes each decision once: a decision repeated unchanged every cycle is logged
    when it first appears, so an idle controller is quiet."""

    def __init__(self, out: TextIO, fmt: LogFormat = "logfmt") -> None:
        self._out = out
        self._fmt = fmt
        # Compared as logged: the same line is the same decision to whoever reads the log.
        self._previous: set[LoggedDecision] = set()

    def write(self, decisions: Iterable[Decision], *, now: float) -> list[Decision]:
        """Log the new decisions; returns them (what the web view's timeline shows)."""
        current = set()
        written = []
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        for decision in decisions:
            logged = decision.logged()
            current.add(logged)
            if logged in self._previous:
                continue
            self._out.write(self.format(decision, stamp) + "\n")
            written.append(decision)
        self._out.flush()
        self._previous = current
        return written

    def note(self, text: str, *, now: float) -> None:
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        if self._fmt == "json":
            line = {"event": "note", "time": stamp, "level": "info", "msg": text}
            self._out.write(json.dumps(line) + "\n")
        else:
            self._out.write(f"note time={stamp} text={_logfmt_value(text)}\n")
        self._out.flush()

    def started(self, fields: Mapping[str, str], *, now: float) -> None:
        """The first line: what runs, with which policy, against which engine, how."""
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        if self._fmt == "json":
            line = {"event": "start", "time": stamp, "level": "info", "msg": "started", **fields}
            self._out.write(json.dumps(line) + "\n")
        else:
            pairs = " ".join(f"{k}={_logfmt_value(v)}" for k, v in fields.items())
            self._out.write(f"start time={stamp} {pairs}\n")
        self._out.flush()

    def format(self, decision: Decision, stamp: str) -> str:
        fields = {
            "time": stamp,
            "rule": decision.rule,
            "subject": decision.subject,
            "outcome": decision.outcome,
            "reason": decision.reason,
        }
        if decision.action_text is not None:
            fields["action"] = decision.action_text
        if self._fmt == "json":
            # `level` and `msg` as every JSON log shipper expects; a refused write warns.
            level = "warning" if decision.outcome == Outcome.FAILED else "info"
            msg = f"{decision.subject}: {decision.outcome}"
            return json.dumps({"event": "decision", "level": level, "msg": msg, **fields})
        return "decision " + " ".join(f"{k}={_logfmt_value(v)}" for k, v in fields.items())
