"""The Sandbox: bring a real multi-node swarm up on this machine, break it, mend it, remove it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from controller.sandbox import daemon, host, image, netns, swarm, typed_docker
from controller.sandbox.spec import (
    FAILURE_MODES,
    NODE_STATES,
    SandboxError,
    SandboxExistsError,
    SandboxSpec,
    SandboxUsageError,
)
from controller.sandbox.state import (
    SUBNET_PREFIX,
    NodeState,
    SandboxState,
    allocate_subnet_index,
    base_dir,
    base_lock,
    cgroup_root,
    check_socket_paths,
    load_state,
    netns_pattern,
    node_netns_name,
    sandbox_dir,
    switch_netns_name,
)
from controller.sandbox.teardown import teardown_sandbox

T = TypeVar("T")
# Ends at once on SIGTERM, as a well-behaved service does: `sleep` as PID 1 ignores it,
# so every stop would wait out the stop grace period (10 s by default).
DEFAULT_COMMAND = ("sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait")


def _each(nodes: Iterable[NodeState], fn: Callable[[NodeState], T]) -> list[T]:
    """Run `fn` on every node in parallel threads; the first error is raised."""
    items = list(nodes)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(fn, items))


class Sandbox:
    """A running sandbox swarm, as recorded in its state file."""

    def __init__(self, state: SandboxState) -> None:
        self._state = state

    # --- life cycle -------------------------------------------------------------------

    @classmethod
    def up(cls, spec: SandboxSpec) -> Sandbox:
        """Create the namespaces, start every node's daemons and form the swarm.

        Raises SandboxExistsError (touching nothing) when the name is taken, and
        SandboxError after removing whatever it made when anything fails.
        """
        tools = host.check_host()
        check_socket_paths(spec.name, spec.hostnames)
        state = _reserve(spec, tools)
        try:
            _bring_up(state)
        except BaseException as exc:
            teardown_sandbox(spec.name, leave_swarm=False)
            if isinstance(exc, SandboxError):
                raise
            if isinstance(exc, Exception):
                raise SandboxError(f"sandbox {spec.name!r} failed to come up: {exc}") from exc
            raise
        return cls(state)

    @classmethod
    def load(cls, name: str) -> Sandbox:
        """Reattach to a sandbox another process brought up."""
        return cls(load_state(name))

    def down(self) -> None:
        """Remove the sandbox and everything it made; raises if anything is left."""
        left = teardown_sandbox(self.name)
        if left:
            raise SandboxError(f"sandbox {self.name!r} left behind {left.describe()}")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    # --- what it is ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def state(self) -> SandboxState:
        return self._state

    @property
    def nodes(self) -> list[str]:
        return [n.hostname for n in self._state.nodes]

    @property
    def managers(self) -> list[str]:
        return [n.hostname for n in self._state.nodes if n.manager]

    @property
    def image_id(self) -> str:
        return self._state.image_id

    def docker_host(self, node: str) -> str:
        return self._state.node(node).docker_host

    @property
    def manager_host(self) -> str:
        """The Docker host of the leader if a manager names one, else of a live manager."""
        leader = swarm.leader(self._state)
        if leader is not None:
            return leader.docker_host
        candidates = swarm.manager_candidates(self._state)
        if not candidates:
            raise SandboxError(f"no manager of sandbox {self.name!r} is running")
        return candidates[0].docker_host

    def client(self, node: str | None = None) -> Any:
        """A docker.DockerClient for `node` (default: a manager), API version negotiated."""
        return typed_docker.docker_client(self.docker_host(node) if node else self.manager_host)

    def node_info(self) -> list[dict[str, Any]]:
        """Every node as a manager sees it: hostname, state, availability, role, labels..."""
        return swarm.query_nodes(self._state)

    def services(self) -> list[dict[str, Any]]:
        return swarm.service_summaries(self.manager_host)

    # --- failures -----------------------------------------------------------------------

    def fail(self, node: str, mode: str) -> None:
        """Break `node`: `crash` (SIGKILL dockerd), `stop` (SIGTERM) or `partition`."""
        if mode not in FAILURE_MODES:
            raise SandboxUsageError(
                f"unknown failure mode {mode!r}: use {', '.join(FAILURE_MODES)}"
            )
        self._refresh()
        target = self._state.node(node)
        if target.failure is not None:
            raise SandboxUsageError(
                f"{node} is already failed ({target.failure}); restore it first"
            )
        if mode == "crash":
            daemon.kill_dockerd(target)
        elif mode == "stop":
            daemon.stop_dockerd(target)
        else:
            netns.set_port(
                self._state.tools["ip"],
                switch=self._state.switch_netns,
                port=target.switch_port,
                up=False,
            )
        target.failure = mode
        self._state.save()

    def restore(self, node: str) -> None:
        """Mend `node`: plug its link back, restart its daemons; the node rejoins by itself."""
        self._refresh()
        target = self._state.node(node)
        ip_tool = self._state.tools["ip"]
        switch, port = self._state.switch_netns, target.switch_port
        if not netns.port_is_up(ip_tool, switch=switch, port=port):
            netns.set_port(ip_tool, switch=switch, port=port, up=True)
        if not daemon.containerd_running(target):
            # Its containerd is gone too: clear its shims, containers and mounts first.
            daemon.clean_node(target)
            daemon.start_containerd(self._state, target)
            self._state.save()
            daemon.wait_containerd(target)
        if not daemon.dockerd_running(target):
            # A killed dockerd left its containerd and containers running. The new dockerd
            # attaches to that containerd; without live-restore it would stop the old
            # containers with their full stop grace, so they are killed first.
            daemon.kill_containers(target)
            daemon.start_dockerd(self._state, target)
            self._state.save()
            daemon.wait_dockerd(target)
        target.failure = None
        self._state.save()

    def wait_node_state(self, node: str, state: str, *, timeout: float = 60.0) -> float:
        """Wait until a manager reports `node` as `state` ("down", "ready"); returns seconds."""
        if state not in NODE_STATES:
            raise SandboxUsageError(f"unknown node state {state!r}: use {', '.join(NODE_STATES)}")
        return swarm.wait_node_state(self._state, node, state, timeout=timeout)

    def wait_ready(self, *, timeout: float = swarm.READY_TIMEOUT_SECONDS) -> None:
        swarm.wait_all_ready(self._state, timeout=timeout)

    # --- services -----------------------------------------------------------------------

    def create_service(
        self,
        name: str,
        *,
        replicas: int = 1,
        labels: Mapping[str, str] | None = None,
        constraints: Sequence[str] = (),
        command: Sequence[str] = DEFAULT_COMMAND,
        reserve_generic: Mapping[str, int] | None = None,
        update_order: str = "start-first",
        restart_delay_seconds: float | None = None,
        mode: str = "replicated",
        stop_grace_seconds: float | None = None,
        reserve_cpus: float | None = None,
        reserve_memory_bytes: int | None = None,
        healthy_after_seconds: float | None = None,
    ) -> str:
        """Create a service running the sandbox image by ID; returns the service ID."""
        if mode not in ("replicated", "global"):
            raise SandboxUsageError(f"unknown service mode {mode!r}: use replicated or global")
        if update_order not in ("start-first", "stop-first"):
            raise SandboxUsageError(f"unknown update order {update_order!r}")
        template = swarm.service_spec(
            image_id=self.image_id,
            command=command,
            constraints=constraints,
            reserve_generic=reserve_generic,
            restart_delay_seconds=restart_delay_seconds,
            stop_grace_seconds=stop_grace_seconds,
            reserve_cpus=reserve_cpus,
            reserve_memory_bytes=reserve_memory_bytes,
            healthy_after_seconds=healthy_after_seconds,
        )
        service_mode: dict[str, Any] = (
            {"Replicated": {"Replicas": replicas}} if mode == "replicated" else {"Global": {}}
        )
        api = typed_docker.api_client(self.manager_host)
        try:
            return typed_docker.create_service(
                api,
                name=name,
                task_template=template,
                mode=service_mode,
                labels=labels or {},
                update_config={"Parallelism": 1, "Order": update_order},
            )
        finally:
            api.close()

    def set_constraints(self, name: str, constraints: Sequence[str] = ()) -> None:
        """Replace a service's placement constraints (none: free to run anywhere)."""
        api = typed_docker.api_client(self.manager_host)
        try:
            typed_docker.set_service_constraints(api, name, list(constraints))
        finally:
            api.close()

    def wait_services_running(self, names: Iterable[str], *, timeout: float = 60.0) -> None:
        """Wait until each named service runs as many tasks as it wants."""
        wanted = set(names)
        deadline = time.monotonic() + timeout
        while True:
            summaries = {s["name"]: s for s in self.services()}
            lagging = [
                n
                for n in sorted(wanted)
                if n not in summaries or summaries[n]["running"] < max(1, summaries[n]["replicas"])
            ]
            if not lagging:
                return
            if time.monotonic() >= deadline:
                raise SandboxError(
                    f"services not running after {timeout:.0f} s: {', '.join(lagging)}"
                )
            time.sleep(0.2)

    def _refresh(self) -> None:
        """Pick up failures and restarts recorded by another process."""
        with contextlib.suppress(SandboxError):
            self._state = load_state(self.name)


def _reserve(spec: SandboxSpec, tools: host.Tools) -> SandboxState:
    """Claim the name, directory and subnet, and record the plan before making anything."""
    with base_lock():
        directory = sandbox_dir(spec.name)
        taken = netns.names_matching(netns_pattern(spec.name))
        if directory.exists() or taken:
            raise SandboxExistsError(
                f"sandbox {spec.name!r} is already up (or was left half made) in "
                f"{directory}: run 'swarm-placement sandbox down --name {spec.name}' first"
            )
        index = allocate_subnet_index(spec.name)
        state = SandboxState(
            name=spec.name,
            dir=str(directory),
            subnet_index=index,
            switch_netns=switch_netns_name(spec.name),
            cgroup_root=cgroup_root(spec.name),
            heartbeat_seconds=spec.heartbeat_seconds,
            tools={
                "dockerd": tools.dockerd,
                "containerd": tools.containerd,
                "nsenter": tools.nsenter,
                "unshare": tools.unshare,
                "ip": tools.ip,
                "busybox": tools.busybox,
            },
            nodes=[
                NodeState(
                    hostname=n.hostname,
                    index=n.index,
                    manager=n.manager,
                    ip=f"{SUBNET_PREFIX}.{index}.{10 + n.index}",
                    netns=node_netns_name(spec.name, n.hostname),
                    switch_port=f"port{n.index}",
                    dir=str(directory / n.hostname),
                    labels=dict(n.labels),
                    generic_resources=dict(n.generic_resources),
                )
                for n in spec.node_specs()
            ],
        )
        state.save()
        return state


def _bring_up(state: SandboxState) -> None:
    state.storage_driver = host.choose_storage_driver(base_dir())
    state.dockerd_major = host.dockerd_major_version(state.tools["dockerd"])
    ip_tool = state.tools["ip"]
    netns.create_switch(ip_tool, state.switch_netns)
    for node in state.nodes:
        netns.create_node(
            ip_tool,
            switch=state.switch_netns,
            node_netns=node.netns,
            port=node.switch_port,
            address=node.ip,
        )
        daemon.prepare(state, node)
    for node in state.nodes:
        daemon.start_containerd(state, node)
    state.save()
    _each(state.nodes, daemon.wait_containerd)
    for node in state.nodes:
        daemon.start_dockerd(state, node)
    state.save()
    _each(state.nodes, daemon.wait_dockerd)

    busybox = state.tools["busybox"]
    first = state.nodes[0]
    cached = image.cached_image(busybox)
    tarball, image_id = cached or image.build_image(busybox, first.docker_host)
    try:
        _each(state.nodes, lambda n: image.load_image(tarball, image_id, n.docker_host))
    except SandboxError:
        if cached is None:
            raise
        # A damaged cache, or one another engine cannot read: build it again here.
        image.forget_cached_image(busybox)
        tarball, image_id = image.build_image(busybox, first.docker_host)
        _each(state.nodes, lambda n: image.load_image(tarball, image_id, n.docker_host))
    state.image_id = image_id
    state.save()

    swarm.form_swarm(state)
    state.save()
    swarm.label_nodes(state, first.docker_host)
    swarm.wait_all_ready(state)
    state.phase = "up"
    state.save()
