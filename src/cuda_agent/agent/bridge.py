"""The way out of the sandbox for the workspace's fixed commands.

Inside the sandbox the evaluator cannot work: its caches are read-only there, and it must not run
where the agent's code runs. So `bash utils/compile.sh`, `python3 -m utils.verification` and
`python3 -m utils.profiling`, when `$CUDA_AGENT_EVAL_SOCKET` is set, send their command and options
over this Unix socket (workspace.commands.forward); the bridge, outside, runs the same command on the
workspace it was given (never a path the request names) with `cuda-agent workspace`, and sends back
its exit status and output. A network namespace does not stop a Unix socket that lives in a folder
both sides see (the sandbox's /tmp).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from cuda_agent.workspace.commands import COMMANDS

MAX_REQUEST = 64 * 1024
MAX_ARGS = 32


class EvalBridge:
    def __init__(self, workspace: str | Path, socket_path: str | Path, timeout_s: float = 1800.0,
                 env: dict[str, str] | None = None):
        """Serve the workspace commands of `workspace` on `socket_path` until `close()`.
        `env`: extra environment of the commands (e.g. CUDA_AGENT_CACHE)."""
        self.root = Path(workspace).resolve()
        self.path = Path(socket_path)
        self.timeout_s = timeout_s
        self.env = {**os.environ, **(env or {})}
        self.env.pop("CUDA_AGENT_EVAL_SOCKET", None)
        self.calls: list[dict] = []  # what was run: command, argv, exit, seconds (for trajectories)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                req = json.loads(_recv_all(conn, MAX_REQUEST))
                command, argv = req["command"], req["argv"]
                if command not in COMMANDS or not isinstance(argv, list) or len(argv) > MAX_ARGS \
                        or not all(isinstance(a, str) for a in argv):
                    raise ValueError("bad request")
            except (ValueError, KeyError, TypeError):
                conn.sendall(json.dumps({"exit": 2, "output": "error: malformed request to the evaluator"}).encode())
                return
            t0 = time.monotonic()
            try:
                p = subprocess.run([sys.executable, "-m", "cuda_agent", "workspace", command, str(self.root), *argv],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                                   timeout=self.timeout_s)
                code, out = p.returncode, p.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired:
                code, out = 1, f"error: the evaluator did not finish within {self.timeout_s:.0f} s"
            self.calls.append({"command": command, "argv": argv, "exit": code,
                               "seconds": round(time.monotonic() - t0, 3)})
            try:
                conn.sendall(json.dumps({"exit": code, "output": out}).encode())
            except OSError:
                pass  # the command inside was killed meanwhile

    @property
    def seconds(self) -> float:
        """Time spent in the evaluator for this workspace so far."""
        return sum(c["seconds"] for c in self.calls)

    def close(self) -> None:
        self._stop = True
        try:
            self.sock.close()
        finally:
            try:
                self.path.unlink()
            except OSError:
                pass


def _recv_all(conn: socket.socket, limit: int) -> bytes:
    """Read until the peer shuts down its side (or `limit` bytes)."""
    chunks, size = [], 0
    while size < limit:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
