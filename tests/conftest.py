import functools
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "src"))
# ... and first for the interpreters the tests start (`python -m cuda_agent`, scripts): an editable
# install of another checkout would otherwise be what they import, and test that checkout instead.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))


@functools.cache
def sandbox_unavailable() -> str | None:
    """Why the agent's sandbox cannot isolate commands on this machine (None when it can), as a
    Sandbox reports it (`isolation["unavailable"]`)."""
    from cuda_agent.agent.sandbox import Sandbox

    with tempfile.TemporaryDirectory() as ws, Sandbox(ws, allow_unsandboxed=True) as box:
        return box.isolation["unavailable"]


_OPEN_BASE: list[Path] = []


def pytest_configure(config):
    """Run as root, sandboxes run as their own user (cuda_agent.sandbox), who must reach the folders
    a test gives them; pytest's temporary root is 0700. The run gets a base folder every user may
    enter instead (xdist's workers take theirs below the controller's)."""
    if os.geteuid() != 0 or config.option.basetemp or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    base = Path(tempfile.mkdtemp(prefix="pytest-cuda-agent-"))
    base.chmod(0o755)
    _OPEN_BASE.append(base)
    config.option.basetemp = str(base / "run")


def pytest_unconfigure(config):
    import shutil

    for base in _OPEN_BASE:
        shutil.rmtree(base, ignore_errors=True)


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One build cache for the whole run, so each distinct extension is compiled once: shared by the
    processes of `pytest -n N` (pytest-xdist), whose builds and CPU timing locks it holds too."""
    d = os.environ.get("CUDA_AGENT_TEST_CACHE")
    if d:
        return Path(d)
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    path = base / "cuda-agent-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def benchmark_script():
    """`load(name)`: the script benchmarks/<name>.py imported as a module, so that its own logic is
    tested without running it."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"{name}_script", REPO / "benchmarks" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    return load


@pytest.fixture(scope="session")
def warm_evaluate():
    """`evaluate(task, candidate, config)` as a warm `Evaluator` of this test process runs it: its
    workers forked from a zygote that imported torch once, its judges kept between evaluations, as
    the service, bench and the RL reward evaluate. A fresh evaluation starts two interpreters that
    import torch (about 10 s of CPU here); tests whose subject is not the one-shot form's own
    processes use this. One Evaluator per setting its warm pool is made for (the sandbox's folders,
    the output limit), closed at the end of the session."""
    from cuda_agent.evaluate import Evaluator

    evaluators: dict[tuple, Evaluator] = {}

    def evaluate(task, candidate, config):
        key = (config.device, str(config.cache_dir), str(config.work_dir), config.isolation,
               config.output_limit, config.warm_spares, config.pin_cpus)
        if key not in evaluators:
            evaluators[key] = Evaluator(config, jobs=1, warm=2)
        return evaluators[key].evaluate(task, candidate, config)

    yield evaluate
    for ev in evaluators.values():
        ev.close()


def share_session_builds(cache: Path, session_cache: Path) -> None:
    """Give a test's own cache what the session's cache has built by now and never changes once
    built: the precompiled torch headers (`pch/`, 0.8 GB each) and our binding's object for the
    toolchain (`builds/binding/`), as hard links. A test whose subject is not their first build then
    does not build them again (a core-minute and more for a header, during which the test's own unit
    compiles without it; 7-14 s of one core for the binding). Only published ones are shared (each
    appears under its final name once complete; names with a dot are builds under way); where none
    is published yet, or links cannot be made, the test builds its own as before."""
    import shutil

    from cuda_agent.evaluate.cache_layout import BUILDS_BINDING, PCH

    for sub in (PCH, BUILDS_BINDING):
        src = session_cache / sub
        for d in (src.iterdir() if src.is_dir() else ()):
            dst = cache / sub / d.name
            if d.is_dir() and "." not in d.name and not dst.exists():
                try:
                    shutil.copytree(d, dst, copy_function=os.link)
                except OSError:
                    shutil.rmtree(dst, ignore_errors=True)
