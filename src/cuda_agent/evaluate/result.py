"""The verdict of one evaluation: `EvalResult`, its reason codes and their kinds.

The JSON form (`EvalResult.to_json()`) is the contract of `cuda-agent eval --json` (DESIGN section 3);
tests pin its keys. `SCHEMA_VERSION` changes whenever a key changes meaning.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


class Kind(str, enum.Enum):
    """Who a failure is charged to. Infra failures stay in every denominator but are reported apart."""

    CANDIDATE = "candidate"  # the candidate is wrong, slow to build, crashes...
    POLICY = "policy"  # the candidate broke a rule (cheating, forbidden ops)
    INFRA = "infra"  # the task, the machine or the evaluator failed
    INFO = "info"  # not a failure: a fact worth recording (TF32 used, baseline unavailable)
    TASK = "task"  # a drafted task is unfit to be a task (the data filter's probe, synth/probe.py)


class Code(str, enum.Enum):
    """Machine-readable reason codes. The value is what appears in JSON."""

    # build and load
    COMPILE_ERROR = "compile_error"
    BUILD_TIMEOUT = "build_timeout"
    LOAD_ERROR = "load_error"
    NO_MODEL_NEW = "no_model_new"
    INIT_ERROR = "init_error"
    STATE_DICT_MISMATCH = "state_dict_mismatch"
    # running
    RUNTIME_ERROR = "runtime_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    LIMIT_EXCEEDED = "limit_exceeded"  # the sandbox's memory, process or disk limit (isolation.limits_hit)
    # correctness
    STRUCTURE_MISMATCH = "structure_mismatch"
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    DEVICE_MISMATCH = "device_mismatch"
    NOT_PLAIN_TENSOR = "not_plain_tensor"
    NON_FINITE = "non_finite"
    OUTPUT_MISMATCH = "output_mismatch"
    STRESS_MISMATCH = "stress_mismatch"
    SHAPE_SPECIFIC = "shape_specific"  # correct only at the task's sizes (EvalConfig.require_generalization)
    TIMED_OUTPUT_MISMATCH = "timed_output_mismatch"
    INPUT_MODIFIED = "input_modified"
    # policy and tampering: static checks (policy.py), runtime guards (guard.py) and the harness
    TORCH_FALLBACK = "torch_fallback"  # 1: PyTorch compute inside forward or the extension (strict)
    DECOY_KERNEL = "decoy_kernel"  # 2: forward never calls into the candidate's extension (strict)
    WEIGHTS_MODIFIED = "weights_modified"  # 4: parameters or buffers changed by forward
    HIDDEN_WORK = "hidden_work"  # 5: threads, host callbacks, work left running after return
    STREAM_RACE = "stream_race"  # 5: output not complete on the caller's stream when forward returns
    TIMING_PROBE = "timing_probe"  # 7: clocks or stack inspection inside the candidate
    HARNESS_PATCH = "harness_patch"  # 8: patching torch, timers, comparisons, the interpreter
    REFERENCE_ACCESS = "reference_access"  # 9: the reference model, the task, gc, frames
    FORBIDDEN_IO = "forbidden_io"  # 9, 11: files, sockets, processes, signals, environment
    EARLY_EXIT = "early_exit"  # 11: exiting the process instead of answering
    PROTOCOL_VIOLATION = "protocol_violation"
    TIMING_TAMPERED = "timing_tampered"
    # infrastructure
    REFERENCE_ERROR = "reference_error"
    DEVICE_UNAVAILABLE = "device_unavailable"
    INFRA_ERROR = "infra_error"
    # information
    BASELINE_COMPILE_UNAVAILABLE = "baseline_compile_unavailable"
    TIMING_SKIPPED = "timing_skipped"
    OUTPUT_TRUNCATED = "output_truncated"
    REDUCED_PRECISION = "reduced_precision"  # TF32 or reduced-precision reductions were switched on
    RETRIED_ALONE = "retried_alone"  # the first try, beside other evaluations, ran short: this is the second
    # the data filter (synth/probe.py): why a drafted task is rejected; with load_error, init_error,
    # out_of_memory, non_finite, compile_error, timeout and crash above
    EAGER_ERROR = "eager_error"  # the reference's forward fails
    NON_FLOAT_OUTPUT = "non_float_output"
    NONDETERMINISTIC = "nondeterministic"  # the same inputs twice give different outputs
    CONSTANT_OUTPUT = "constant_output"
    INPUT_INDEPENDENT = "input_independent"  # other inputs give outputs within the evaluator's tolerance
    TOO_FAST = "too_fast"  # eager time per call under the runtime window
    TOO_SLOW = "too_slow"  # over it
    COMPILE_MISMATCH = "compile_mismatch"  # torch.compile's output is not within tolerance of eager's
    PROBE_ERROR = "probe_error"  # the probe itself failed (a bug of ours, or a task breaking it)


KIND_OF: dict[Code, Kind] = {
    **{c: Kind.CANDIDATE for c in Code},
    **{c: Kind.POLICY for c in (Code.TORCH_FALLBACK, Code.DECOY_KERNEL, Code.WEIGHTS_MODIFIED,
                                 Code.HIDDEN_WORK, Code.TIMING_PROBE, Code.HARNESS_PATCH,
                                 Code.REFERENCE_ACCESS, Code.FORBIDDEN_IO, Code.EARLY_EXIT)},
    Code.PROTOCOL_VIOLATION: Kind.POLICY,
    Code.TIMING_TAMPERED: Kind.POLICY,
    Code.NOT_PLAIN_TENSOR: Kind.POLICY,
    Code.INPUT_MODIFIED: Kind.POLICY,
    Code.REFERENCE_ERROR: Kind.INFRA,
    Code.DEVICE_UNAVAILABLE: Kind.INFRA,
    Code.INFRA_ERROR: Kind.INFRA,
    Code.BASELINE_COMPILE_UNAVAILABLE: Kind.INFO,
    Code.TIMING_SKIPPED: Kind.INFO,
    Code.OUTPUT_TRUNCATED: Kind.INFO,
    Code.REDUCED_PRECISION: Kind.INFO,
    Code.RETRIED_ALONE: Kind.INFO,
    **{c: Kind.TASK for c in (Code.EAGER_ERROR, Code.NON_FLOAT_OUTPUT, Code.NONDETERMINISTIC,
                               Code.CONSTANT_OUTPUT, Code.INPUT_INDEPENDENT, Code.TOO_FAST, Code.TOO_SLOW,
                               Code.COMPILE_MISMATCH)},
    Code.PROBE_ERROR: Kind.INFRA,
}


@dataclass(frozen=True, slots=True)
class Reason:
    code: Code
    message: str

    @property
    def kind(self) -> Kind:
        return KIND_OF[self.code]

    @property
    def is_failure(self) -> bool:
        return self.kind is not Kind.INFO

    def gist(self, limit: int = 500) -> str:
        """The message in a line: its first line and, from a traceback, the exception (its last)."""
        lines = [line.strip() for line in self.message.splitlines() if line.strip()]
        return " ... ".join(dict.fromkeys(lines[:1] + lines[-1:]))[:limit]

    def to_json(self) -> dict[str, str]:
        return {"code": self.code.value, "kind": self.kind.value, "message": self.message}


def quantile(s: list[float], p: float) -> float:
    """The p-quantile of the sorted, non-empty `s`: linear interpolation between closest ranks."""
    x = p * (len(s) - 1)
    lo = int(x)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


@dataclass(slots=True)
class TimeStats:
    """Per-call times of one implementation in milliseconds, over `n` samples (each the mean of one
    batch of back-to-back calls)."""

    median: float
    iqr: float  # interquartile range, the spread reported beside the median
    min: float
    max: float
    n: int
    mean: float | None = None  # for tools that report mean and standard deviation (KernelBench)
    std: float | None = None

    @classmethod
    def of(cls, samples_ms: list[float]) -> "TimeStats":
        s = sorted(samples_ms)
        n = len(s)
        mean = sum(s) / n
        std = (sum((x - mean) ** 2 for x in s) / (n - 1)) ** 0.5 if n > 1 else 0.0

        return cls(median=quantile(s, 0.5), iqr=quantile(s, 0.75) - quantile(s, 0.25), min=s[0], max=s[-1],
                   n=n, mean=mean, std=std)


@dataclass(slots=True)
class EvalResult:
    task: str
    candidate: str
    device: dict[str, Any] = field(default_factory=dict)
    compiled: bool = False
    correct: bool = False
    reward: int = -1
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    times_ms: dict[str, TimeStats | None] = field(
        default_factory=lambda: {"eager": None, "compile": None, "candidate": None}
    )
    reasons: list[Reason] = field(default_factory=list)
    seeds: dict[str, Any] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, float] | None = None  # worst max_abs / rel_norm error over passing comparisons
    generalization: dict[str, Any] | None = None  # shape trials at other sizes (EvalConfig.shapes), else None
    phases_s: dict[str, float] = field(default_factory=dict)
    candidate_output: dict[str, Any] = field(default_factory=dict)
    timing_check: dict[str, Any] | None = None  # the harness's clock against the candidate's claims
    weights: dict[str, Any] | None = None  # how the reference's state reached ModelNew (weights.py)
    isolation: dict[str, Any] = field(default_factory=dict)  # the candidate's sandbox: what held (sandbox.record)
    sol: dict[str, Any] | None = None  # the speed of light and the candidate's fraction of it (sol.py)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def failures(self) -> list[Reason]:
        return [r for r in self.reasons if r.is_failure]

    def add(self, code: Code, message: str) -> None:
        self.reasons.append(Reason(code, message))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons"] = [r.to_json() for r in self.reasons]
        d["times_ms"] = {k: (asdict(v) if v is not None else None) for k, v in self.times_ms.items()}
        return {"schema_version": SCHEMA_VERSION, **d}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "EvalResult":
        d = dict(d)
        d.pop("schema_version", None)
        d["reasons"] = [Reason(Code(r["code"]), r["message"]) for r in d.get("reasons", [])]
        d["times_ms"] = {k: (TimeStats(**v) if v else None) for k, v in d.get("times_ms", {}).items()}
        return cls(**d)
