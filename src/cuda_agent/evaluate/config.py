"""Configuration of one evaluation. Field docstrings double as the CLI help text
(`cli.options.field_docs`)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


DEVICES = ("auto", "cuda", "cpu")  # `device`; auto is cuda when a GPU is present
POLICIES = ("strict", "kernelbench", "none")  # `policy`: the profiles of evaluate.policy
SERVICE_MODES = ("auto", "start", "off")  # commands' --service: use a running service, start one, or never
TOUCHES = ("bf16", "tf32")  # the busy work before each timed call (`touch` below, `timing.Timer`)
ISOLATION_MODES = ("auto", "required", "off")  # `isolation` (cuda_agent.sandbox.MODES)
REWARDS = ("milestone", "sol")  # `reward` (reward.py)


def default_cache_dir() -> Path:
    """`$CUDA_AGENT_CACHE`, else `$XDG_CACHE_HOME/cuda-agent`, else `~/.cache/cuda-agent`."""
    if env := os.environ.get("CUDA_AGENT_CACHE"):
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuda-agent"


def default_service_mode() -> str:
    """`$CUDA_AGENT_SERVICE` (one of SERVICE_MODES), else `auto`: how commands use the warm
    evaluation service (evaluate/service.py) when not told otherwise."""
    mode = os.environ.get("CUDA_AGENT_SERVICE") or "auto"
    if mode not in SERVICE_MODES:
        raise ValueError(f"CUDA_AGENT_SERVICE={mode!r}: use one of {', '.join(SERVICE_MODES)}")
    return mode


@dataclass(kw_only=True, slots=True)
class EvalConfig:
    device: str = "auto"
    """Backend: `cuda`, `cpu`, or `auto` (cuda when a GPU is present)."""
    policy: str = "strict"
    """Rules for candidates: `strict` (CUDA-Agent's: only your own kernels inside forward),
    `kernelbench` (PyTorch ops allowed inside forward; every cheating check still on) or `none`
    (static checks off: only for testing the runtime defences)."""
    trials: int = 5
    """Correctness trials, each with fresh inputs from its own unpredictable seed."""
    stress_trials: int = 2
    """Extra trials on inputs beyond the task's distribution that keep its structure: exact zeros,
    signs, integer values and inputs within [-1, 1] stay so (skipped where the reference is not
    finite)."""
    shapes: int = 0
    """After the correctness trials and timing, call a correct candidate on this many more input
    sets at other sizes: the task's size constants that only get_inputs reads, scaled (1.5x, 0.5x,
    2x, ...; sizes the reference cannot take, or too large for memory, skipped). The result says
    `generalization.generalizes`; the reward is unchanged (KernelBench's contract fixes the shapes)
    unless `require_generalization`."""
    require_generalization: bool = False
    """With `shapes`: a candidate correct at the task's sizes but not at another size it tried is
    incorrect (`shape_specific`, reward -1)."""
    atol: float = 1e-2
    """Absolute tolerance of the element-wise comparison."""
    rtol: float = 1e-2
    """Relative tolerance of the element-wise comparison."""
    norm_tol: float | None = None
    """Bound on ||out - ref|| / ||ref||; default 5 * max(atol, rtol). Catches degenerate answers that
    pass allclose element-wise (all zeros for a softmax over many columns has a norm error of 1) while
    leaving room for reduced-precision internal math (fp16, bf16, TF32)."""
    seeds: list[int] | None = None
    """Seeds to replay a verdict (the `seeds.all` list of an earlier result): one per trial, then
    one per stress trial, then the model-init seed and the timing seed. Default: drawn from the
    OS's entropy source."""
    timing: bool = True
    """Measure eager, torch.compile and the candidate (needed for rewards above 1)."""
    compile_baseline: bool = True
    """Measure the torch.compile baseline (default mode)."""
    baseline_cache: bool = True
    """Reuse the baselines' timings measured before for the same task, device and software (kept
    under `cache_dir/baselines`); False measures them in every evaluation, interleaved with the
    candidate's calls."""
    timing_budget_s: float = 0.25
    """Target seconds of timed calls of the candidate (split over the rounds; calls that are not
    timed, fresh inputs and checks, stretch a round up to three times this)."""
    baseline_budget_s: float | None = None
    """Target seconds of timed calls of each baseline when measured for the cache (once per task,
    device and software, then reused); default four times `timing_budget_s`. Baselines that are not
    cached are timed with `timing_budget_s`, interleaved with the candidate."""
    timing_rounds: int = 3
    """Interleaved rounds of eager, compile, candidate."""
    min_iters: int = 5
    """Fewest timing samples (batches of calls) per implementation."""
    max_iters: int = 300
    """Most timing samples (batches of calls) per implementation."""
    batch_calls: int = 8
    """Most calls of one implementation per command, back to back on distinct inputs (fewer when a
    batch's inputs and outputs would not fit in memory, or its calls would take over ~5 ms). Calls
    of one process in a row keep its host side warm, the same for the candidate and the baselines;
    each timing sample is a batch's mean."""
    touch: str = "bf16"
    """The busy work right before each timed call, in every process that times (`Timer.touch`):
    on a GPU shared by time slices, the switch to the timing process's context happens during it
    rather than inside the timed call, and the clocks are up when the call starts. `bf16`: two bf16
    2048x2048 products, whose cost no TF32 setting (which a candidate may change) alters; `tf32`:
    four TF32 1024x1024 products of random values. Part of the timing protocol: cached baselines
    are keyed by it, so a candidate is compared only with baselines timed after the same work."""
    inline_pch: bool = True
    """Candidates' own `load_inline`/`load` builds: their host unit includes a precompiled header of
    torch/extension.h (one per set of compiler flags, under `cache_dir/pch`, built beside the first
    build that needs it) instead of parsing torch's headers each time (worker/inline_build.py); and
    nvcc's final host compile of a build's only CUDA unit reads the unit's headers from a precompiled
    header too (one per headers and flags, under `cache_dir/pch-nvcc`; worker/nvcc_pch.py)."""
    inline_light_headers: bool = True
    """Candidates' own CUDA units that include torch/extension.h are compiled first with torch's
    tensor API (torch/types.h) in that header's place, and again as written where that does not
    compile (worker/light_nvcc.py): nvcc then parses a fraction of libtorch instead of all of it."""
    inline_tensor_header: bool = True
    """With `inline_light_headers`: try a lighter header still first (worker/tensor_headers: at::Tensor,
    options, dispatch and torch's factories, without ATen's other operators): nvcc takes about a third
    less time on a unit with it than with torch/types.h, and it gave the same code on the corpus units
    checked, instruction by instruction (docs/measured/2026-12-04-fresh-h200.md). Off: units go to
    torch/types.h first."""
    stream_check: bool = True
    """CUDA: in the correctness trials, check that each output is complete on the caller's current
    stream when forward returns (`stream_race` otherwise; worker/runner.py, `StreamCheck`). A kernel that leaves
    its work on a side stream it never joins back passes the timer (which waits for every stream)
    but hands the caller an output still being written. False: no hold and no snapshot."""
    timed_check_fraction: float = 0.25
    """Share of the candidate's timed calls whose output the judge checks, picked at random after
    each command (every timed call gets fresh inputs either way). 1.0 checks them all."""
    timeout_s: float = 300.0
    """Wall-clock limit of the whole evaluation after the build, in seconds."""
    build_timeout_s: float = 600.0
    """Wall-clock limit of building the candidate's extension."""
    cache_dir: Path = field(default_factory=default_cache_dir)
    """Build cache and compiled extensions, shared by all evaluations."""
    work_dir: Path | None = None
    """Where an evaluation stages its files and shared buffers (removed when it ends). Default: the
    system's temporary directory for staging and /dev/shm for buffers."""
    output_limit: int = 16384
    """Bytes of the candidate's stdout/stderr kept (head and tail); the rest is counted and dropped."""
    reuse_judges: bool = True
    """With a pool of warm workers (`Evaluator`), a judge (trusted: it runs the task's reference,
    never candidate code) serves later evaluations on its GPU once it has forgotten the last one
    and finds its process as it started (torch's switches, its functions, no threads left); each
    reuse spares the machine a CUDA context made and destroyed. False: a fresh judge every time."""
    ipc_segments: bool = True
    """CUDA: the judge maps each device allocation of the candidate once per evaluation and views
    the tensors it is sent inside it. False: torch's sharing, with an IPC open, close and event per
    tensor sent (driver calls that the host serialises with every process's context creation)."""
    warm_spares: bool = False
    """CUDA, with a pool of warm workers (`Evaluator`): besides its CUDA context, each spare makes
    its timer's buffers, initialises cuBLAS and leaves a 256 MiB segment in torch's cache before an
    evaluation takes it, so that these driver calls happen off the evaluation's path (each spare
    then holds that segment as well as its context while idle; what one held:
    docs/measured/2026-12-07-figures-from-the-code.md)."""
    isolation: str = "auto"
    """The candidate's process and its builds in an operating-system sandbox (bubblewrap: no
    network, the file system read-only but its own folders, the evaluator's cache and the home
    folders hidden, its own PID namespace, limits): `auto` where the machine allows it (else
    without, with a warning and `isolation.level: none` in the result), `required` (refuse to
    evaluate without it), `off`."""
    reward: str = "milestone"
    """The result's reward: `milestone` (CUDA Agent's: -1 incorrect, 1 correct, 2 more than 5% faster
    than eager, 3 than eager and torch.compile) or `sol` (ours, not the paper's: 1 correct, 2 at a
    fifth of the speed of light or more, 3 at half or more; the result's `sol` says how it is counted)."""
    pin_cpus: bool = False
    """CUDA, with a pool of warm workers (`Evaluator`): each GPU's workers run on the CPUs of that
    GPU's NUMA node (its PCI device's `local_cpulist`), so that no evaluation times its launches and
    synchronizes from the far socket; ignored where the node cannot be told."""

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r}: use one of {', '.join(DEVICES)}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy={self.policy!r}: use one of {', '.join(POLICIES)}")
        if self.trials < 1:
            raise ValueError(f"trials={self.trials}: at least 1 correctness trial is needed (default 5)")
        if self.stress_trials < 0:
            raise ValueError(f"stress_trials={self.stress_trials}: must be 0 or more")
        if self.shapes < 0:
            raise ValueError(f"shapes={self.shapes}: must be 0 (off) or more")
        if self.require_generalization and not self.shapes:
            raise ValueError("require_generalization needs shape trials: set shapes to 1 or more (--shapes 2)")
        for name in ("atol", "rtol"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: tolerances must be >= 0")
        if self.timing_budget_s <= 0 or (self.baseline_budget_s is not None and self.baseline_budget_s <= 0):
            raise ValueError("timing_budget_s and baseline_budget_s must be > 0 seconds")
        if self.baseline_budget_s is None:
            self.baseline_budget_s = 4 * self.timing_budget_s
        if self.norm_tol is None:
            self.norm_tol = 5 * max(self.atol, self.rtol)
        if self.seeds is not None and len(self.seeds) != self.n_seeds:
            raise ValueError(
                f"seeds: got {len(self.seeds)}, need {self.n_seeds} "
                f"({self.trials} trials + {self.stress_trials} stress trials + init + timing); "
                "copy the `seeds` list from an earlier result to replay it"
            )
        if not 0 < self.timed_check_fraction <= 1:
            raise ValueError(f"timed_check_fraction={self.timed_check_fraction}: must be in (0, 1]")
        if self.batch_calls < 1:
            raise ValueError(f"batch_calls={self.batch_calls}: must be 1 or more (default 8)")
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation={self.isolation!r}: use one of {', '.join(ISOLATION_MODES)}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward={self.reward!r}: use one of {', '.join(REWARDS)}")
        if self.touch not in TOUCHES:
            raise ValueError(f"touch={self.touch!r}: use one of {', '.join(TOUCHES)} (default {TOUCHES[0]})")
        if self.timing_rounds < 1 or self.min_iters < 1 or self.max_iters < self.min_iters:
            raise ValueError("timing: need timing_rounds >= 1 and 1 <= min_iters <= max_iters")
        # absolute: the runner works in a folder of its own, where a relative path names another place
        self.cache_dir = Path(self.cache_dir).expanduser().absolute()
        if self.work_dir is not None:
            self.work_dir = Path(self.work_dir).expanduser().absolute()

    @property
    def n_seeds(self) -> int:
        return self.trials + self.stress_trials + 2

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["cache_dir"] = str(self.cache_dir)
        d["work_dir"] = None if self.work_dir is None else str(self.work_dir)
        return d
