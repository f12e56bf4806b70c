"""What the room filters read from a service spec: platforms, host-mode ports, and the
mounts whose data stays on the node."""

from __future__ import annotations

import pytest

from controller.adapters.attrs import AttrsError, service_from_attrs


def _service(template: dict, endpoint: dict | None = None) -> dict:  # type: ignore[type-arg]
    spec = {"Name": "web", "Mode": {"Replicated": {"Replicas": 1}}, "TaskTemplate": template}
    if endpoint is not None:
        spec["EndpointSpec"] = endpoint
    return {"ID": "s", "Version": {"Index": 3}, "Spec": spec}


def test_platforms_are_read_as_os_and_architecture() -> None:
    template = {
        "Placement": {"Platforms": [{"OS": "linux", "Architecture": "arm64"}, {"OS": "windows"}]}
    }
    svc = service_from_attrs(_service(template))
    assert svc.platforms == (("linux", "arm64"), ("windows", ""))
    assert service_from_attrs(_service({})).platforms == ()


def test_only_host_mode_published_ports_are_kept() -> None:
    ports = [
        {"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 8080, "PublishMode": "host"},
        {"Protocol": "udp", "TargetPort": 53, "PublishedPort": 5353, "PublishMode": "host"},
        {"Protocol": "tcp", "TargetPort": 443, "PublishedPort": 443, "PublishMode": "ingress"},
        {"TargetPort": 9000, "PublishMode": "host"},  # no published port: Swarm picks one
    ]
    svc = service_from_attrs(_service({}, {"Mode": "vip", "Ports": ports}))
    assert svc.host_ports == ("5353/udp", "8080/tcp")


def test_a_malformed_port_list_is_an_error_not_a_guess() -> None:
    with pytest.raises(AttrsError):
        service_from_attrs(_service({}, {"Ports": "8080"}))


def test_mounts_whose_data_stays_on_the_node_are_read() -> None:
    """As `docker stack deploy` writes the voting app's db (a named volume, no driver
    given: the local one), beside mounts whose data is no node's."""
    mounts = [
        {"Type": "volume", "Source": "voting_db-data", "Target": "/var/lib/postgresql/data"},
        {"Type": "volume", "Source": "cache", "VolumeOptions": {"DriverConfig": {"Name": "local"}}},
        {
            "Type": "volume",
            "Source": "media",  # the local driver mounting an NFS share: any node's
            "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": {"type": "nfs4"}}},
        },
        {"Type": "bind", "Source": "/srv/conf", "Target": "/etc/app"},
        {"Type": "volume", "Source": "shared", "VolumeOptions": {"DriverConfig": {"Name": "nfs"}}},
        {"Type": "volume", "Target": "/scratch"},  # anonymous: new for every task anyway
        {"Type": "tmpfs", "Target": "/run"},
    ]
    svc = service_from_attrs(_service({"ContainerSpec": {"Mounts": mounts}}))
    assert svc.local_data == ("volume voting_db-data", "volume cache", "bind /srv/conf")
    assert service_from_attrs(_service({"ContainerSpec": {"Image": "x"}})).local_data == ()


def test_a_malformed_mount_list_is_an_error_not_a_guess() -> None:
    with pytest.raises(AttrsError):
        service_from_attrs(_service({"ContainerSpec": {"Mounts": {"Type": "bind"}}}))
