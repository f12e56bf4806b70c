"""OpenTelemetry's own variables: service name and resource attributes, the exporter,
and OTLP over gRPC or HTTP; service.instance.id tells the replicas apart."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

from controller.cli.run_cmd import otel_exporter
from controller.runtime import tracing
from controller.runtime.tracing import make_tracer_provider


def _resource(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], instance: str | None
) -> dict[str, object]:
    for key in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    provider = make_tracer_provider("none", instance=instance)
    try:
        return dict(provider.resource.attributes)
    finally:
        provider.shutdown()


def test_the_default_name_and_the_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    attributes = _resource(monkeypatch, {}, "placement_controller.1.abc@node-1")
    assert attributes["service.name"] == "swarm-placement"
    assert attributes["service.instance.id"] == "placement_controller.1.abc@node-1"


def test_otel_service_name_and_resource_attributes_are_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attributes = _resource(
        monkeypatch,
        {
            "OTEL_SERVICE_NAME": "placement-prod",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=ops",
        },
        None,
    )
    assert attributes["service.name"] == "placement-prod"
    assert attributes["deployment.environment"] == "prod" and attributes["team"] == "ops"
    named = _resource(
        monkeypatch, {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes"}, None
    )
    assert named["service.name"] == "from-attributes"


@pytest.mark.parametrize(
    ("value", "exporter"),
    [
        ("", "none"),
        ("otlp", "otlp"),
        ("console", "console"),
        ("zipkin,otlp", "otlp"),
        ("zipkin", "none"),
    ],
)
def test_otel_traces_exporter_is_the_default_exporter(value: str, exporter: str) -> None:
    assert otel_exporter({"OTEL_TRACES_EXPORTER": value}) == exporter


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, Http),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Grpc),
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            Http,
        ),
    ],
)
def test_otlp_speaks_grpc_or_http_as_the_protocol_variable_says(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kind: type
) -> None:
    for key in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    exporter = tracing._otlp_exporter()
    try:
        assert isinstance(exporter, kind)
    finally:
        exporter.shutdown()


def test_an_unknown_protocol_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    with pytest.raises(RuntimeError, match="'http/json' is not supported"):
        tracing._otlp_exporter()
