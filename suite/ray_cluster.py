"""A Ray cluster of several nodes on this machine, each node a separate ``ray start`` process tree on loopback.

For the tests and the scale-out measurement (:mod:`experiments.measure.scale_out`): a head node and worker nodes, each
started by ``ray start [--head | --address HEAD] --block`` with its own CPUs, custom resources and node labels,
exactly as on a real cluster (where the nodes are different machines). What keeps clusters apart, so that
parallel test runs and CI never collide:

- ports: the head's GCS port, the Ray client port and every node's agent port are free ports picked at start;
  workers bind random ports (``--min-worker-port 0``);
- files: ``RAY_TMPDIR`` (Ray's sessions, logs, sockets and its ``ray_current_cluster`` address file) is a fresh
  folder, so ``--address auto`` finds this cluster only in processes given :meth:`LocalRayCluster.env`;
- processes: every process of the cluster carries ``GNNSUITE_RAY_CLUSTER=<token>`` and
  ``GNNSUITE_RAY_NODE=<node name>`` in its environment (inherited from ``ray start`` by the raylet, the GCS,
  the agents and every worker), so :meth:`~LocalRayCluster.kill_node` and :meth:`~LocalRayCluster.stop` signal
  exactly this cluster's processes, by pid.

:meth:`LocalRayCluster.stop` is this cluster's ``ray stop``: SIGTERM to its processes, SIGKILL after a grace
period, then it checks none is left. (``ray stop`` itself would stop *every* Ray process of the machine,
including other people's clusters; the environment tag scopes it to this one.)

Ray is optional (``pip install 'gnnsuite[scale]'``); this module imports it only in the processes it starts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from suite.errors import ConfigError

CLUSTER_ENV = "GNNSUITE_RAY_CLUSTER"
NODE_ENV = "GNNSUITE_RAY_NODE"
NODE_LABEL = "node-name"  # the label naming a node; recorded as ``placement.node_name`` of the runs it ran
_STARTED = "Ray runtime started"

# Fast failure detection, so that a killed node is declared dead in seconds (Ray's defaults take ~30 s).
FAST_FAILURE_DETECTION = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RayNode:
    """One node: its name, the ``ray start --block`` process, and its log file."""

    name: str
    process: subprocess.Popen
    log: Path
    num_cpus: int
    resources: dict[str, float] = field(default_factory=dict)


class LoopbackNamespace:
    """A Linux network namespace holding only the loopback interface (``ip netns``; needs root).

    Ray advertises a node's routable address even when told ``127.0.0.1``; inside this namespace the only
    address is ``127.0.0.1``, so a cluster started in it talks over loopback and nothing else. Processes join it
    through :meth:`command`. :meth:`close` deletes it (idempotent).
    """

    def __init__(self) -> None:
        self.name = f"gnnsuite-{uuid.uuid4().hex[:10]}"
        _ip("netns", "add", self.name)
        try:
            _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def available() -> bool:
        """Whether namespaces can be made here (root, and the ``ip`` command)."""
        return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def close(self) -> None:
        """Delete the namespace."""
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)

    def __enter__(self) -> "LoopbackNamespace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


def _signal_all(processes: Iterable[psutil.Process], signum: signal.Signals) -> None:
    """Send ``signum`` to each process; one already gone (or not ours to signal) is passed over."""
    for process in processes:
        try:
            process.send_signal(signum)
        except psutil.Error:
            pass


def _reap(node: RayNode) -> None:
    """Collect the exit status of ``node``'s launcher process, waiting at most 5 s for it."""
    try:
        node.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class LocalRayCluster:
    """A Ray head node and worker nodes on this machine (see the module docstring).

    Use as a context manager (the cluster stops on exit, also after an error), or call :meth:`stop`.

    Args:
        root: parent of the cluster's ``RAY_TMPDIR`` (default: the system's temp folder; keep it short, Ray's
            unix socket paths must fit in 107 bytes).
        fast_failure_detection: declare a dead node dead within seconds (:data:`FAST_FAILURE_DETECTION`).
        object_store_bytes: object store size per node.
        start_timeout_s: how long a node may take to start.
        network: ``namespace``: every process of the cluster (and every driver started through
            :meth:`command`) in one :class:`LoopbackNamespace`; ``host``: the machine's network, where Ray binds
            and advertises the machine's routable address; ``auto``: ``namespace`` where it can be made (root),
            else ``host``.
        extra_env: environment variables of every process of the cluster and its drivers (e.g. ``PYTHONPATH``).
    """

    def __init__(self, root: str | os.PathLike | None = None, *, fast_failure_detection: bool = True,
                 object_store_bytes: int = 100 << 20, start_timeout_s: float = 90.0,
                 network: str = "auto", extra_env: dict[str, str] | None = None):
        if network not in ("auto", "namespace", "host"):
            raise ValueError(f"network: expected auto, namespace or host, got {network!r}")
        if network == "auto":
            network = "namespace" if LoopbackNamespace.available() else "host"
        self.namespace = LoopbackNamespace() if network == "namespace" else None
        self.token = uuid.uuid4().hex[:12]
        self.auth_token = uuid.uuid4().hex + uuid.uuid4().hex  # Ray's token authentication, this cluster's own
        self.tmpdir = Path(tempfile.mkdtemp(prefix="ray-", dir=root))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: dict[str, RayNode] = {}
        self._extra_env = {**(FAST_FAILURE_DETECTION if fast_failure_detection else {}), **(extra_env or {})}
        self._object_store_bytes = object_store_bytes
        self._start_timeout_s = start_timeout_s

    # ------------------------------------------------------------------ environment
    def command(self, argv: list[str]) -> list[str]:
        """``argv`` as a process of this cluster's network (inside its namespace, if it has one)."""
        return self.namespace.command(argv) if self.namespace is not None else list(argv)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a driver of this cluster: ``RAY_TMPDIR`` (so ``--address auto`` finds it),
        ``RAY_ADDRESS``, and the cluster's tag (processes it starts are stopped with the cluster)."""
        env = dict(os.environ if base is None else base)
        env.update(self._extra_env)
        env.update(RAY_TMPDIR=str(self.tmpdir), RAY_ADDRESS=self.address, RAY_USAGE_STATS_ENABLED="0",
                   RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.auth_token, **{CLUSTER_ENV: self.token})
        return env

    # ------------------------------------------------------------------ nodes
    def start_head(self, num_cpus: int = 1, name: str = "head", resources: dict[str, float] | None = None) -> RayNode:
        """Start the head node (GCS, raylet, agents) with ``num_cpus`` CPUs and ``resources``."""
        if self.nodes:
            raise RuntimeError("the head node is started first, once")
        args = ["--head", f"--port={self.port}", f"--ray-client-server-port={free_port()}",
                "--include-dashboard=false", "--disable-usage-stats"]
        return self._start(name, num_cpus, resources, args)

    def add_node(self, name: str, num_cpus: int = 1, resources: dict[str, float] | None = None) -> RayNode:
        """Start a worker node that joins the head (``ray start --address HEAD``)."""
        if not self.nodes:
            raise RuntimeError("start the head node first")
        if name in self.nodes:
            raise ValueError(f"node {name!r} exists already")
        return self._start(name, num_cpus, resources, [f"--address={self.address}"])

    def _start(self, name: str, num_cpus: int, resources: dict[str, float] | None, args: list[str]) -> RayNode:
        ray = shutil.which("ray", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        if ray is None:
            raise ConfigError("ray: the 'ray' command is not installed (pip install 'gnnsuite[scale]')")
        resources = dict(resources or {})
        log = self.tmpdir / f"node-{name}.log"
        command = [ray, "start", "--block", *args, f"--num-cpus={num_cpus}", "--num-gpus=0",
                   f"--resources={json.dumps(resources)}", f"--labels={NODE_LABEL}={name}",
                   f"--object-store-memory={self._object_store_bytes}", "--min-worker-port=0",
                   "--max-worker-port=0", f"--dashboard-agent-listen-port={free_port()}",
                   f"--node-ip-address=127.0.0.1", f"--temp-dir={self.tmpdir}"]
        env = self.env()
        env.pop("RAY_ADDRESS")
        env[NODE_ENV] = name
        with open(log, "wb") as stream:
            process = subprocess.Popen(self.command(command), stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
        node = RayNode(name, process, log, num_cpus, resources)
        self.nodes[name] = node
        deadline = time.monotonic() + self._start_timeout_s
        while _STARTED not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                self.kill_node(name)
                raise RuntimeError(f"ray node {name!r} did not start ({'exited' if process.poll() is not None else 'timed out'}):\n{tail}")
            time.sleep(0.2)
        return node

    # ------------------------------------------------------------------ processes
    def processes(self, node: str | None = None) -> list[psutil.Process]:
        """This cluster's live processes (of one node when ``node`` is given), found by their environment tag."""
        found = []
        for process in psutil.process_iter():
            try:
                env = process.environ()
            except (psutil.Error, OSError):
                continue
            if env.get(CLUSTER_ENV) == self.token and (node is None or env.get(NODE_ENV) == node):
                found.append(process)
        return found

    def node_processes(self, name: str) -> list[psutil.Process]:
        """The processes of node ``name``: its ``ray start`` process, its descendants, and tagged processes."""
        found = {p.pid: p for p in self.processes(name)}
        node = self.nodes.get(name)
        if node is not None and node.process.poll() is None:
            try:
                root = psutil.Process(node.process.pid)
                found.setdefault(root.pid, root)
                for child in root.children(recursive=True):
                    found.setdefault(child.pid, child)
            except psutil.Error:
                pass
        return list(found.values())

    def kill_node(self, name: str) -> list[int]:
        """SIGKILL every process of node ``name`` at once (a node failure); return their pids. The node is then
        gone from :attr:`nodes` (a new one may take its name)."""
        processes = self.node_processes(name)
        _signal_all(processes, signal.SIGKILL)
        psutil.wait_procs(processes, timeout=10)
        node = self.nodes.pop(name, None)
        if node is not None:
            _reap(node)
        return [process.pid for process in processes]

    def stop(self, grace_s: float = 3.0) -> list[int]:
        """Stop the cluster (its scoped ``ray stop``): SIGTERM to every process of it, SIGKILL to those left after
        ``grace_s``; remove its temp folder. Returns the pids of processes still alive afterwards (none, normally).
        Safe to call twice."""
        processes = {p.pid: p for name in list(self.nodes) for p in self.node_processes(name)}
        processes.update({p.pid: p for p in self.processes()})
        processes.pop(os.getpid(), None)  # a driver that carries the tag does not stop itself
        _signal_all(processes.values(), signal.SIGTERM)
        _, alive = psutil.wait_procs(list(processes.values()), timeout=grace_s)
        _signal_all(alive, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5)
        for node in self.nodes.values():
            _reap(node)
        left = [p.pid for p in self.processes() if p.pid != os.getpid()]
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        if self.namespace is not None and not left:
            self.namespace.close()
        return left

    def logs(self, name: str, tail: int = 4000) -> str:
        """The end of node ``name``'s ``ray start`` output."""
        node = self.nodes[name]
        return node.log.read_text(errors="replace")[-tail:] if node.log.exists() else ""

    def __enter__(self) -> "LocalRayCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["CLUSTER_ENV", "FAST_FAILURE_DETECTION", "LocalRayCluster", "LoopbackNamespace", "NODE_ENV",
           "NODE_LABEL", "RayNode", "free_port"]
