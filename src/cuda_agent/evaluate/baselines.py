"""Baselines: the reference's own timings (eager and torch.compile), measured once per task, device
and software versions, and kept on disk.

A baseline is measured exactly like a candidate (`Evaluation.run_batch`): the reference, wrapped as a
`ModelNew` (`baseline_candidate`), runs in a runner process of its own that never loads candidate
code, on fresh inputs that the judge writes into its buffers. Same process layout, same commands,
same clock: what the protocol costs lands on both sides alike.

Entries live in `<cache_dir>/baselines/<sha256 of the task source>.json`, written atomically; within
it, an entry's key covers the rest of what changes a timing: the device (name, capability, memory,
driver), torch, CUDA and Python versions, the most calls per command allowed (`batch_calls`) and
the timing protocol's version (`PROTOCOL`). The entry records the batch size it was measured with,
and a later evaluation of the task adopts it for the candidate (the size follows from the reference's
time per call, whose noise would otherwise make evaluations miss the cache). Each entry carries an HMAC
keyed by a secret file created with mode 0600 beside it, so an entry edited by hand, or by a
candidate that got past the static policy's ban on file IO, is ignored and measured again (a
candidate running as the same user could still read that secret: docs/threat-model.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.result import TimeStats

PROTOCOL = 3  # bump when the timing method changes: entries measured the old way stop matching

# Device fields that make two timings comparable (not the host name or the device index: identical
# GPUs share their baselines).
_DEVICE_FIELDS = ("type", "name", "capability", "multiprocessors", "memory_gb", "l2_bytes", "cuda",
                  "driver", "torch", "python", "threads")

_SHIMS = {
    "eager": '''

class ModelNew(Model):
    """The reference itself, timed like a candidate (cuda-agent's eager baseline)."""
''',
    "compile": '''

import torch as _cuda_agent_torch


class ModelNew(Model):
    """The reference under torch.compile (default mode), timed like a candidate."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cuda_agent_compiled = _cuda_agent_torch.compile(super().forward)

    def forward(self, *args, **kwargs):
        return self._cuda_agent_compiled(*args, **kwargs)
''',
}


def baseline_candidate(task_source: str, which: str) -> Candidate:
    """The task's reference as a candidate: `eager` or `compile`."""
    return Candidate(origin=f"<{which} baseline>", kind="file", model_new=task_source + _SHIMS[which])


@dataclass(slots=True)
class Baselines:
    eager: TimeStats
    compile: TimeStats | None
    compile_error: str | None
    calls_per_batch: int
    device: dict[str, Any]
    measured_at: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Baselines":
        return cls(eager=TimeStats(**d["eager"]),
                   compile=TimeStats(**d["compile"]) if d.get("compile") else None,
                   compile_error=d.get("compile_error"), calls_per_batch=int(d["calls_per_batch"]),
                   device=dict(d["device"]), measured_at=str(d["measured_at"]))


def task_hash(task_source: str) -> str:
    return hashlib.sha256(task_source.encode()).hexdigest()


def baseline_key(device: dict[str, Any], batch_calls: int, compile_baseline: bool, touch: str = "bf16") -> str:
    """Which of a task's entries applies: the device, the software, the most calls per command
    (`EvalConfig.batch_calls`), the protocol (with `EvalConfig.touch`, the busy work before each
    call)."""
    fields = {
        "protocol": PROTOCOL,
        "device": {k: device.get(k) for k in _DEVICE_FIELDS},
        "batch_calls": batch_calls,
        "compile": compile_baseline,
        "touch": touch,
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


class BaselineCache:
    """One file per task (`<sha256 of its source>.json`) holding its entries by `baseline_key`.
    An evaluation reads its task's file (`snapshot`) before any worker process starts, so nothing a
    candidate writes can reach its own evaluation."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _secret(self) -> bytes:
        path = self.root / ".secret"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another evaluation created it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        return path.read_bytes()

    def _mac(self, task: str, key: str, entry: dict[str, Any]) -> str:
        body = json.dumps({"task": task, "key": key, "entry": entry}, sort_keys=True)
        return hmac.new(self._secret(), body.encode(), hashlib.sha256).hexdigest()

    def _path(self, task: str) -> Path:
        return self.root / f"{task}.json"

    def snapshot(self, task_source: str) -> dict[str, Any]:
        """The task's entries as stored now (unverified; `lookup` verifies)."""
        try:
            doc = json.loads(self._path(task_hash(task_source)).read_text())
            return {"task": task_hash(task_source), "entries": dict(doc["entries"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"task": task_hash(task_source), "entries": {}}

    def lookup(self, snapshot: dict[str, Any], key: str) -> Baselines | None:
        """The entry for `key` in a snapshot, or None when there is none or it fails its HMAC."""
        try:
            doc = snapshot["entries"][key]
            if not hmac.compare_digest(str(doc["mac"]), self._mac(snapshot["task"], key, doc["entry"])):
                return None
            return Baselines.from_json(doc["entry"])
        except (ValueError, KeyError, TypeError):
            return None

    def get(self, task_source: str, key: str) -> Baselines | None:
        return self.lookup(self.snapshot(task_source), key)

    def put(self, task_source: str, key: str, entry: Baselines) -> Path:
        """Add or replace one entry of the task's file (read, merge and replace under a lock)."""
        self.root.mkdir(parents=True, exist_ok=True)
        task = task_hash(task_source)
        body = entry.to_json()
        with open(self.root / f".{task}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = self.snapshot(task_source)["entries"]
            entries[key] = {"entry": body, "mac": self._mac(task, key, body)}
            fd, tmp = tempfile.mkstemp(prefix=f".{task}.", dir=self.root)
            with os.fdopen(fd, "w") as f:
                json.dump({"entries": entries}, f, indent=1)
            os.replace(tmp, self._path(task))
        return self._path(task)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
