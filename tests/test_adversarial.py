"""The adversarial suite: candidates that cheat the evaluator or fault in every way DESIGN section 3
("Trust boundary") lists, and honest candidates that must not be flagged.

Each case is a single-file candidate in tests/adversarial/: `cases/catNN_<name>.py` (cheats and
faults, by category) and `honest/<name>.py`. A case starts with a docstring (the cheat, and why
evaluators miss it), then metadata comments:

    # category: 6                  1..13, or `honest`
    # task: relu_bias              default tests/data/relu_bias_task.py; else tests/adversarial/tasks/<name>.py
    # devices: cpu cuda            the backends where it applies
    # expect[strict]: output_mismatch      one test per line and device: the case evaluated under that
    # expect[none]: output_mismatch        policy profile must end with reward -1 and this reason code
                                           among its failures (`a|b`: any of them, where the verdict
                                           depends on garbage memory or on which layer fires first);
                                           `pass` means judged correct and unflagged
    # fault: hang                  category 13: which fault kind the case is (FAULT_KINDS: the
                                   process faults, and honest candidates' wrong answers; a
                                   `syntax_error` case is valid Python up to its `class ModelNew`)
    # kind: side_stream            honest cases: which honest pattern the case is
    # timeout_s: 20                the evaluation's timeout_s (default 60)
    # config: stream_check=true    other EvalConfig fields the case is evaluated with
    # flood: true                  also check that the candidate's output is kept bounded

Placeholders, replaced by the test with device-specific text (lines on their own, at column 0):
`#@KERNEL` by tests/adversarial/kernels/{cpu,cuda}.py, which sets `ADV_DEVICE` and builds the suite's
honest relu(x + bias) extension as `ext` (`ext.relu_bias(x, b)`, `ext.relu_bias_out(x, b, out)`);
`#@DEVICE` by just `ADV_DEVICE = "cpu"` / `"cuda"`, for cases that build their own extension.

Profiles: `strict` (static policy + torch ops forbidden in forward + runtime guards), `kernelbench`
(torch ops allowed in forward, every other rule enforced), `none` (static checks off: what the
runtime layers and process isolation catch on their own).

CUDA tests carry the `gpu` mark (skipped without a GPU); everything here carries `adversarial`.
The extension builds go to the session's build cache (conftest.py), so each distinct extension is
compiled once per session.
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from cuda_agent.evaluate import EvalConfig, EvalResult, Evaluator, evaluate, load_candidate
from cuda_agent.evaluate.config import POLICIES as PROFILES
from cuda_agent.evaluate.evaluator import EvaluatorBase
from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.service import ServiceClient, running
from cuda_agent.tasks import load_task

pytestmark = pytest.mark.adversarial

HERE = Path(__file__).resolve().parent
ADV = HERE / "adversarial"
DEFAULT_TASK = HERE / "data" / "relu_bias_task.py"
DEVICES = ("cpu", "cuda")
PASS = "pass"
CHEAT_CATEGORIES = range(1, 13)
FAULT_KINDS = {"compile_error", "exception", "segfault", "illegal_memory", "hang", "oom", "flood",
               # honest candidates with wrong answers, or none: faults of the candidate, not cheats
               "wrong_value", "wrong_shape", "wrong_dtype", "wrong_structure", "wrong_device",
               "stress_mismatch", "no_model_new", "init_error", "syntax_error"}
UNPARSABLE = "syntax_error"  # the fault kind whose file is not valid Python (past its metadata)
NO_MODEL_NEW = "no_model_new"  # the fault kind whose file defines no ModelNew
HONEST_KINDS = {"plain", "side_stream", "weight_transform", "cublas", "fp16", "multi_launch",
                # patterns of real model-written kernels that earlier rules rejected
                "autotune", "autograd", "class_state", "build_dir", "renamed_params", "reshaped_params",
                "structured_input", "lazy_derived_state", "aliased_state", "verbose",
                # correct at sizes other than the task's (shape trials: `# config: shapes=N`)
                "general_shapes"}
OUTPUT_BOUND = 64 * 1024  # bytes of candidate output a result may keep, at most
DEFAULT_TIMEOUT_S = 60

_META = re.compile(r"^#\s*(?P<key>category|task|devices|expect\[(?P<profile>\w+)\]|fault|kind|timeout_s|flood|config)"
                   r"\s*:\s*(?P<value>\S.*?)\s*$")
_PLACEHOLDER = {"#@KERNEL", "#@DEVICE"}


@dataclasses.dataclass(frozen=True)
class Case:
    path: Path
    honest: bool
    category: int | None  # None for honest cases
    task: Path
    devices: tuple[str, ...]
    expects: tuple[tuple[str, str], ...]  # (profile, "code" / "code|code" / "pass"), in file order
    fault: str | None
    kind: str | None
    timeout_s: int
    flood: bool
    config: tuple[tuple[str, object], ...]  # EvalConfig fields beside the suite's defaults
    problems: tuple[str, ...]  # metadata errors, reported by test_every_case_has_valid_metadata_and_every_category_has_its_cases

    @property
    def id(self) -> str:
        return f"honest_{self.path.stem}" if self.honest else self.path.stem

    def render(self, device: str) -> str:
        """The candidate's source for `device`, placeholders replaced."""
        src = self.path.read_text()
        block = (ADV / "kernels" / f"{device}.py").read_text()
        src = re.sub(r"^#@KERNEL[ \t]*$", lambda _: block, src, flags=re.M)
        return re.sub(r"^#@DEVICE[ \t]*$", lambda _: f'ADV_DEVICE = "{device}"', src, flags=re.M)


def _parse(path: Path, honest: bool) -> Case:
    problems: list[str] = []
    meta: dict[str, str] = {}
    expects: list[tuple[str, str]] = []
    text = path.read_text()
    try:
        body = ast.parse(text).body
    except SyntaxError as exc:
        # a syntax-error case is valid Python up to its error: its docstring and metadata come first
        lines = text.splitlines()[: (exc.lineno or 1) - 1]
        body = ast.parse("\n".join(lines)).body if _parses("\n".join(lines)) else []
        if f"# fault: {UNPARSABLE}" not in text:
            problems.append(f"{path.name}: not valid Python: {exc}")
    code = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    header = text.splitlines()[: code[0].lineno - 1] if code else []  # metadata: before any code
    for line in header:
        m = _META.match(line)
        if not m:
            continue
        if m["profile"]:
            expects.append((m["profile"], m["value"]))
        elif m["key"] in meta:
            problems.append(f"{path.name}: `{m['key']}` given twice")
        else:
            meta[m["key"]] = m["value"]
    category: int | None = None
    raw = meta.get("category", "")
    if honest:
        if raw != "honest":
            problems.append(f"{path.name}: honest cases say `# category: honest`")
    elif raw.isdigit() and 1 <= int(raw) <= 13:
        category = int(raw)
    else:
        problems.append(f"{path.name}: `# category:` must be 1..13, got {raw!r}")
    if not honest and not path.stem.startswith(f"cat{category or 0:02d}_"):
        problems.append(f"{path.name}: the file name must start with cat{category or 0:02d}_")
    task_name = meta.get("task", "relu_bias")
    task = DEFAULT_TASK if task_name == "relu_bias" else ADV / "tasks" / f"{task_name}.py"
    if not task.is_file():
        problems.append(f"{path.name}: no task file {task}")
    devices = tuple(meta.get("devices", "").split())
    if not devices or any(d not in DEVICES for d in devices) or len(set(devices)) != len(devices):
        problems.append(f"{path.name}: `# devices:` must list some of {DEVICES}, got {devices}")
    profiles = [p for p, _ in expects]
    if not expects:
        problems.append(f"{path.name}: no `# expect[PROFILE]: CODE` line")
    if len(set(profiles)) != len(profiles):
        problems.append(f"{path.name}: one expect line per profile")
    for profile, code in expects:
        if profile not in PROFILES:
            problems.append(f"{path.name}: unknown profile {profile!r} (use one of {PROFILES})")
        if honest and code != PASS:
            problems.append(f"{path.name}: honest cases expect `pass`, got {code!r}")
        if PASS in code.split("|") and code != PASS:
            problems.append(f"{path.name}: `pass` cannot be an alternative ({code!r})")
    try:
        timeout_s = int(meta.get("timeout_s", DEFAULT_TIMEOUT_S))
    except ValueError:
        problems.append(f"{path.name}: `# timeout_s:` must be an integer")
        timeout_s = DEFAULT_TIMEOUT_S
    config = []
    for item in meta.get("config", "").split():
        key, _, value = item.partition("=")
        if key not in {f.name for f in dataclasses.fields(EvalConfig)} or not value:
            problems.append(f"{path.name}: `# config:` takes EvalConfig fields as name=value, got {item!r}")
            continue
        config.append((key, int(value) if value.isdigit() else {"true": True, "false": False}.get(value.lower(), value)))
    return Case(path=path, honest=honest, category=category, task=task, devices=devices,
                expects=tuple(expects), fault=meta.get("fault"), kind=meta.get("kind"),
                timeout_s=timeout_s, flood=meta.get("flood", "").lower() == "true",
                config=tuple(config), problems=tuple(problems))


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
    except SyntaxError:
        return False
    return True


def _discover() -> list[Case]:
    cases = [_parse(p, honest=False) for p in sorted((ADV / "cases").glob("*.py"))]
    cases += [_parse(p, honest=True) for p in sorted((ADV / "honest").glob("*.py"))]
    return cases


CASES = _discover()
BY_ID = {c.id: c for c in CASES}


def _params() -> list:
    params = []
    for case in CASES:
        for profile, code in case.expects:
            for device in case.devices:
                marks = [pytest.mark.gpu] if device == "cuda" else []
                params.append(pytest.param(case, profile, code, device, marks=marks,
                                           id=f"{case.id}-{profile}-{device}"))
    return params


# --- running one case ------------------------------------------------------------------------------

def _config(profile: str, device: str, cache_dir: Path, timeout_s: int) -> EvalConfig:
    return EvalConfig(device=device, policy=profile, cache_dir=cache_dir, compile_baseline=False,
                      timing_budget_s=0.1, timeout_s=timeout_s)


def _run(case: Case, profile: str, device: str, cache_dir: Path, tmp_path: Path,
         evaluator: EvaluatorBase | None = None, **extra: object) -> EvalResult:
    """One evaluation of the case: by `evaluate`, or through `evaluator` (its warm, forked workers);
    `extra`: EvalConfig fields over the case's own (benchmarks/adversarial.py --shapes)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cand = tmp_path / f"{case.path.stem}.py"
    cand.write_text(case.render(device))
    cfg = dataclasses.replace(_config(profile, device, cache_dir, case.timeout_s), **{**dict(case.config), **extra})
    run = evaluator.evaluate if evaluator is not None else evaluate
    return run(load_task(case.task), load_candidate(cand), cfg)


def _codes(res: EvalResult) -> list[str]:
    return [r.code.value for r in res.failures]


def _explain(res: EvalResult) -> str:
    lines = [f"correct={res.correct} reward={res.reward} compiled={res.compiled}"]
    lines += [f"  {r.code.value} [{r.kind.value}]: {r.message[:1500]}" for r in res.reasons]
    return "\n".join(lines)


def _assert_honest(res: EvalResult) -> None:
    why = _explain(res)
    assert res.correct, why
    assert res.reward >= 1, why
    assert res.failures == [], why
    assert not [r for r in res.reasons if r.kind.value == "policy"], why


@pytest.fixture(scope="module")
def cpu_evaluator(cache_dir):
    """The CPU cases go through the warm evaluation service (`cuda-agent serve`, here in a thread of
    this process, one evaluation at a time), as bench, the agent's tools and the RL reward run them
    when it runs: warm workers forked from its zygote, judges kept between evaluations, every
    request over its socket. Fresh interpreters (`evaluate`) get the same verdicts:
    test_fresh_interpreters_get_the_same_verdicts; an Evaluator of this process too:
    test_workers_forked_from_a_zygote_get_the_same_verdicts."""
    folder = Path(tempfile.mkdtemp(prefix="ca-adv-"))  # short: a socket's path is at most 107 bytes
    with running(_config("kernelbench", "cpu", cache_dir, DEFAULT_TIMEOUT_S), folder / "s.sock", jobs=1), \
            ServiceClient(folder / "s.sock") as client:
        yield client
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("case,profile,code,device", _params())
def test_each_case_gets_its_expected_verdict(case: Case, profile: str, code: str, device: str, cache_dir, tmp_path, request):
    evaluator = request.getfixturevalue("cpu_evaluator") if device == "cpu" else None
    t0 = time.monotonic()
    res = _run(case, profile, device, cache_dir, tmp_path, evaluator=evaluator)
    _assert_verdict(case, code, res, time.monotonic() - t0)


def _assert_verdict(case: Case, code: str, res: EvalResult, elapsed: float) -> None:
    if code == PASS:
        _assert_honest(res)
        if dict(case.config).get("shapes"):  # shape trials ran, and it is correct at every size tried
            gen = res.generalization
            assert gen is not None and gen["generalizes"] is True and gen["tried"], gen
    else:
        assert res.reward == -1, _explain(res)
        assert not res.correct, _explain(res)
        wanted = code.split("|")
        assert set(wanted) & set(_codes(res)), \
            f"expected {' or '.join(wanted)} among the failures; got\n{_explain(res)}"
    if case.flood:
        out = res.candidate_output
        kept = len(out.get("stdout", "").encode()) + len(out.get("stderr", "").encode())
        assert kept < OUTPUT_BOUND, f"{kept} bytes of candidate output kept in the result"
        assert out["bytes"] > 10 * OUTPUT_BOUND, f"the flood was not counted in full: {out['bytes']} bytes"
        assert Code.OUTPUT_TRUNCATED in [r.code for r in res.reasons], _explain(res)
    if case.fault in ("compile_error", UNPARSABLE):  # a candidate that does not build or import
        assert not res.compiled, _explain(res)
    if case.fault == "hang":  # the limit holds: build and load are not part of it
        spent = elapsed - res.phases_s.get("load", 0.0) - res.phases_s.get("build", 0.0)
        assert spent < case.timeout_s + 30, f"the hang took {spent:.0f} s (limit {case.timeout_s} s)"


# process faults, and an honest candidate, through workers forked from a warm pool's zygote
FORKED = ("cat11_exit_zero", "cat13_segfault", "cat13_hang", "cat13_output_flood", "cat13_exception",
          "cat05_python_thread", "cat11_channel_forgery", "honest_plain_ext")


def test_workers_forked_from_a_zygote_get_the_same_verdicts(cache_dir, tmp_path):
    """An Evaluator's spares are forked from its pool's zygote once it is warm (zygote.py). Exits,
    signals, hangs, floods, leftover threads and a forged channel get the same verdicts through
    them as through fresh interpreters, and an honest candidate still passes; judges kept from one
    case to the next (`reuse_judges`) judge the next as a fresh one would."""
    with Evaluator(_config("kernelbench", "cpu", cache_dir, DEFAULT_TIMEOUT_S), jobs=1) as ev:
        pool = ev.pool()
        assert pool.zygote is not None and pool.zygote.ready.wait(120), "the zygote did not warm up"
        with pool.lock:  # replace the spares started before the zygote was warm
            started, pool.spares = pool.spares, []
        for w in started:
            w.close()
        pool.fill()
        _check_forked_cases(cache_dir, tmp_path, evaluator=ev)
        assert not pool.zygote.dead and all(w.forked for w in pool.spares)
        # every judge and candidate was forked, or a judge kept from an earlier case (whose
        # candidate's fault did not spoil it: the verdicts above were right all the same)
        stats = ev.stats()
        assert stats["cold"] == 0 and stats["judges_reused"] >= 1, stats
        assert stats["forked"] + stats["judges_reused"] >= pool.size + 2 * len(FORKED), stats


def test_fresh_interpreters_get_the_same_verdicts(cache_dir, tmp_path):
    """The faults and the honest candidate above, each evaluated by `evaluate` (its own fresh worker
    processes, as `cuda-agent eval` runs them) instead of through the shared Evaluator."""
    _check_forked_cases(cache_dir, tmp_path)


def _check_forked_cases(cache_dir: Path, tmp_path: Path, evaluator: Evaluator | None = None) -> None:
    """Each case of FORKED on the CPU, under its most permissive profile (the runtime layers alone
    where the case says so), gets the verdict it expects."""
    for case_id in FORKED:
        case = BY_ID[case_id]
        expects = dict(case.expects)
        profile = next(p for p in ("none", "kernelbench", "strict") if p in expects)
        t0 = time.monotonic()
        res = _run(case, profile, "cpu", cache_dir, tmp_path / case.id, evaluator=evaluator)
        _assert_verdict(case, expects[profile], res, time.monotonic() - t0)


@pytest.mark.gpu
def test_gpu_still_serves_after_faults(cache_dir, tmp_path):
    """A fault that kills a CUDA context (illegal address) or exhausts the device leaves the GPU
    usable: the next evaluation on it is unaffected."""
    honest = BY_ID["honest_plain_ext"]
    for fault_id in ("cat13_illegal_memory", "cat13_oom"):
        fault = BY_ID[fault_id]
        t0 = time.monotonic()
        bad = _run(fault, "strict", "cuda", cache_dir, tmp_path / fault_id)
        _assert_verdict(fault, dict(fault.expects)["strict"], bad, time.monotonic() - t0)
        good = _run(honest, "strict", "cuda", cache_dir, tmp_path / f"after_{fault_id}")
        _assert_honest(good)


# --- the suite itself ------------------------------------------------------------------------------

def test_every_case_has_valid_metadata_and_every_category_has_its_cases():
    problems = [p for c in CASES for p in c.problems]
    assert not problems, "\n".join(problems)
    cheats = [c for c in CASES if not c.honest]
    for cat in CHEAT_CATEGORIES:
        mine = [c for c in cheats if c.category == cat]
        assert len(mine) >= 2, f"category {cat}: {len(mine)} case(s), want at least 2"
        for dev in DEVICES:  # every category 1..12 applies to both backends
            on = [c.id for c in mine if dev in c.devices]
            assert len(on) >= 2, f"category {cat}: {len(on)} case(s) on {dev} ({on}), want at least 2"
    faults = [c for c in cheats if c.category == 13]
    assert all(c.fault in FAULT_KINDS for c in faults), [(c.id, c.fault) for c in faults]
    kinds = [c.fault for c in faults]
    assert sorted(kinds) == sorted(FAULT_KINDS), f"fault kinds: {sorted(kinds)}, want each of {sorted(FAULT_KINDS)} once"
    assert all(c.fault is None for c in cheats if c.category != 13)
    honest_kinds = {c.kind for c in CASES if c.honest}
    assert HONEST_KINDS <= honest_kinds, f"missing honest kinds: {sorted(HONEST_KINDS - honest_kinds)}"
    assert all(c.kind for c in CASES if c.honest)
    for c in cheats:
        assert PASS not in [code for _, code in c.expects] or c.category == 1, \
            f"{c.id}: only a category-1 case may pass (under a profile that allows torch ops)"
        assert any(code != PASS for _, code in c.expects), f"{c.id}: a cheat must fail somewhere"
    # Every expected code is one the evaluator emits.
    valid = {c.value for c in Code}
    unknown = sorted({f"{c.id}: {code}" for c in CASES for _, alts in c.expects
                      for code in alts.split("|") if code != PASS and code not in valid})
    assert not unknown, "reason codes missing from cuda_agent.evaluate.result.Code:\n" + "\n".join(unknown)


@pytest.mark.parametrize("device", DEVICES)
def test_every_case_renders_to_python_that_defines_what_it_uses(device):
    """Every case, with its placeholders replaced, is valid Python, and a case uses `ext` or
    `ADV_DEVICE` only when it asks for the block that defines them."""
    for kernel in ("cpu", "cuda"):
        block = (ADV / "kernels" / f"{kernel}.py").read_text()
        assert f'name="adv_relu_bias_{kernel}"' in block
        ast.parse(block)
    for case in CASES:
        raw = case.path.read_text()
        src = case.render(device)
        assert not [ln for ln in src.splitlines() if ln.strip() in _PLACEHOLDER], case.id
        if case.fault == UNPARSABLE:  # valid Python up to its `class ModelNew` line, and not beyond
            assert not _parses(src), f"{case.id}: a syntax-error case must not parse"
            head = src[: src.index("class ModelNew")]
            assert ast.get_docstring(ast.parse(head)), f"{case.id}: starts with a docstring"
            continue
        tree = ast.parse(src, filename=str(case.path))
        assert ast.get_docstring(tree), f"{case.id}: starts with a docstring"
        names = {n.id for n in ast.walk(ast.parse(raw)) if isinstance(n, ast.Name)}
        if "ext" in names:
            assert "#@KERNEL" in raw, f"{case.id}: uses ext without #@KERNEL"
        if "ADV_DEVICE" in names:
            assert "#@KERNEL" in raw or "#@DEVICE" in raw, f"{case.id}: uses ADV_DEVICE without a placeholder"
        defines = any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
        assert defines is (case.fault != NO_MODEL_NEW), case.id


# --- nothing left behind ---------------------------------------------------------------------------

def _eval_paths() -> set[str]:
    tmp = tempfile.gettempdir()
    patterns = [os.path.join(tmp, "cuda-agent-eval-*"), os.path.join(tmp, "cuda-agent-shm-*"),
                "/dev/shm/cuda-agent-shm-*", "/dev/shm/cuda-agent-eval-*"]
    return {p for pat in patterns for p in glob.glob(pat)}


def _procs() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) of every live process (zombies and dead ones left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces and parens
        if fields[0] in ("Z", "X", "x"):
            continue
        out[int(entry)] = (int(fields[1]), fields[0])
    return out


def _descendants(root: int) -> set[int]:
    procs = _procs()
    found = set()
    for pid in procs:
        p, hops = pid, 0
        while p in procs and hops < 128:
            p, hops = procs[p][0], hops + 1
            if p == root:
                found.add(pid)
                break
    return found


def _ours(path: str) -> bool:
    """Made by this process, or by one that is gone: a directory's name carries its maker's pid
    (another process's warm pool keeps idle spares' folders for as long as it runs)."""
    m = re.match(r"cuda-agent-(?:eval|shm)-(\d+)-", os.path.basename(path))
    if m is None or int(m.group(1)) == os.getpid():
        return True
    return not os.path.exists(f"/proc/{m.group(1)}")


def _in_use(path: str) -> bool:
    """True while some live process works in `path` (its cwd, a file open or mapped from it): an
    evaluation still running elsewhere (another pytest, a CLI run), not a leftover of ours."""
    inside = path + os.sep
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            if cwd == path or cwd.startswith(inside):
                return True
            with open(f"/proc/{entry}/maps") as f:
                if inside in f.read():
                    return True
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(inside):
                    return True
        except OSError:
            continue
    return False


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind():
    """After the whole module: no staging or shared-memory directory of an evaluation is left in the
    temporary directories, and no process started during the module is still alive."""
    paths_before = _eval_paths()
    procs_before = _descendants(os.getpid())
    yield
    # Evaluations running concurrently elsewhere (another pytest, a CLI run) make directories of
    # the same names: whatever is not ours disappears when they end, so only what stays is reported.
    deadline = time.monotonic() + 90
    while True:
        paths = {p for p in _eval_paths() - paths_before if _ours(p) and not _in_use(p)}
        procs = _descendants(os.getpid()) - procs_before
        if (not paths and not procs) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not paths, f"left behind by evaluations: {sorted(paths)}"
    described = []
    for pid in sorted(procs):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            described.append(f"{pid}: {cmdline[:200]}")
        except OSError:
            pass
    assert not described, "processes left running:\n" + "\n".join(described)
