"""Fresh candidates: what RL and a benchmark pay for code never built before, in one table.

    python benchmarks/fresh.py stage                       # here: copy the chosen corpus kernels to .fresh/
    python benchmarks/fresh.py run --device cuda           # on the GPU (carry .fresh)
    python benchmarks/fresh.py table a.json b.json         # one table from runs split over calls

Candidates: single-file `load_inline` kernels that language models wrote for KernelBench level 1 and
that KernelBench judged correct (`../shared/corpora/kernelbench-a100-runs`: one `__global__` kernel,
`torch/extension.h`), each made new by a comment with a random nonce in its source, so that nothing
of it is in any cache. Their tasks' baselines are measured first (not counted): the targets are
for a fresh candidate with its baselines cached; so are the precompiled headers of the builds,
made by two warm-up candidates where the cache has none (`headers` in the JSON). Steps (`--steps`):

- `alone`: `--alone` fresh candidates one after the other through an `Evaluator` (warm workers, one
  evaluation at a time): the full evaluation's time and its phases (build, load, trials, timing);
  after each, the same candidate with its Python edited outside the kernel (a new candidate whose
  extension is built: the agent's usual next step);
- `parallel`: `--n` fresh candidates through an `Evaluator` running `--jobs` at once, from a warm
  pool (its spares started, as in a running service): the median latency of one, throughput in
  fresh candidates per minute, and the machine's CPU-seconds per candidate (with its cores, the
  throughput the CPU allows at most);
- `kernelbench`: KernelBench's method on the same kernels (a fresh process per candidate that
  `exec`s it, building its extension with `load_inline`, then five correctness trials and 100
  timed trials with CUDA events; KernelBench's eval.py itself is not on the machine, so this is
  its method reimplemented), alone and `--jobs` at once;
- `memory`: each staged task's kernel evaluated alone, its processes' device memory sampled: the
  peak of their sum and of each role, against what the memory ledger admits it by (`memory.need`);
- `service`: through a warm service (`cuda-agent serve`), on unchanged code: `cuda-agent eval` of a
  cached candidate, and the workspace's verify and profile, each the median of `--repeat` runs
  after one to warm up; and the workspace's compile after an edit to one kernel (a new comment
  each time: the agent's loop), after one full build of the workspace.

Every figure goes to `--json` as it is measured; the table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "kernelbench-a100-runs"
STAGE = ROOT / ".fresh"
STEPS = ("alone", "parallel", "kernelbench", "service", "memory")


# -- stage: choose the kernels (development machine) --
def suitable(text: str) -> bool:
    return ("load_inline" in text and text.count("__global__") == 1 and "torch/extension.h" in text
            and "cpp_extension.load(" not in text)


def cmd_stage(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for line in (args.corpus / "verdicts.jsonl").read_text().splitlines() if line.strip()]
    chosen, seen = [], set()
    for r in sorted(rows, key=lambda r: (r["problem"], r["run"])):
        kb = r.get("kernelbench") or {}
        if r["level"] != 1 or not kb.get("correct") or r["problem"] in seen:
            continue
        text = (args.corpus / r["file"]).read_text()
        if not suitable(text):
            continue
        [task] = (args.corpus / "tasks" / "level1").glob(f"{r['problem']}_*.py")
        chosen.append((r, task))
        seen.add(r["problem"])
    # spread over the level (matmuls, activations, norms, reductions, convolutions), not its first N
    step = max(len(chosen) / args.tasks, 1.0)
    chosen = [chosen[int(i * step)] for i in range(min(args.tasks, len(chosen)))]
    shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "tasks").mkdir(parents=True)
    (args.out / "kernels").mkdir()
    index = []
    for r, task in chosen:
        shutil.copy(task, args.out / "tasks" / task.name)
        name = f"{r['run']}__{Path(r['file']).name}"
        shutil.copy(args.corpus / r["file"], args.out / "kernels" / name)
        index.append({"task": f"tasks/{task.name}", "kernel": f"kernels/{name}", "run": r["run"],
                      "problem": r["problem"], "kernelbench_ms": r["kernelbench"].get("runtime_ms")})
    (args.out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"staged {len(index)} kernels and their tasks in {args.out} (carry it to the GPU machine)")
    return 0


# -- run (GPU machine) --
def fresh_variant(source: str, tag: str) -> str:
    """The kernel with a comment of `tag` after each `#include <torch/extension.h>`: new sources for
    load_inline, the same code."""
    return re.sub(r"(#include\s*<torch/extension\.h>)", rf"\1\n// fresh variant {tag}", source)


class Log:
    def __init__(self, path: Path | None):
        self.path, self.doc = path, {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def put(self, key: str, value, quiet: bool = False) -> None:
        """Record `value` under `key` (and write the whole document: a run cut short keeps what it
        measured); print it unless `quiet`."""
        self.doc[key] = value
        if self.path:
            self.path.write_text(json.dumps(self.doc, indent=1, default=str))
        if not quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {key}: {json.dumps(value, default=str)[:400]}", flush=True)


def candidates(stage: Path, n: int, tmp: Path):
    """`n` fresh (task, candidate path, name) triples over the staged kernels, round robin."""
    from cuda_agent.tasks import load_task

    index = json.loads((stage / "index.json").read_text())
    out = []
    for i in range(n):
        row = index[i % len(index)]
        tag = secrets.token_hex(6)
        path = tmp / f"{Path(row['kernel']).stem}_{tag}.py"
        path.write_text(fresh_variant((stage / row["kernel"]).read_text(), tag))
        out.append((load_task(stage / row["task"]), path, f"p{row['problem']}_{tag}"))
    return out


def verdict(res) -> dict:
    """A row's verdict: its reasons' codes, and the messages of notes and of failures (`Reason.gist`),
    so that a batch's failures can be told apart afterwards."""
    notes = [f"{r.code.value}: {r.message.strip()[:400]}" for r in res.reasons if not r.is_failure]
    why = [f"{r.code.value}: {r.gist(400)}" for r in res.failures]
    return {"correct": res.correct, "reward": res.reward, "reasons": [r.code.value for r in res.failures],
            "phases_s": res.phases_s, "total_s": res.phases_s.get("total"), **({"notes": notes} if notes else {}),
            **({"failures": why} if why else {})}


def ninja_steps(root: Path) -> dict:
    """The steps of the newest extension build under `root` (its `.ninja_log`: seconds per target,
    the last run of each) and its compilers' flags (`build.ninja`): where a build's time went, to
    compare ours with KernelBench's on the same kernel."""
    logs = sorted(root.glob("**/.ninja_log"), key=lambda f: f.stat().st_mtime) if root.is_dir() else []
    if not logs:
        return {}
    steps = {}
    for line in logs[-1].read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 4 and parts[0].isdigit():
            steps[parts[3]] = round((int(parts[1]) - int(parts[0])) / 1e3, 2)
    ninja = logs[-1].with_name("build.ninja")
    flags = {}
    if ninja.is_file():
        for line in ninja.read_text(errors="replace").splitlines():
            key, _, value = line.partition(" = ")
            if key in ("nvcc", "cxx", "cflags", "cuda_cflags", "cuda_post_cflags"):
                flags[key] = value[:600]
    notes = [f.read_text(errors="replace").splitlines() for f in logs[-1].parent.glob("*.how")]
    how = {}
    if notes and notes[0]:  # light_nvcc.py's note: which compile made the CUDA unit; its final compile's header
        how["cuda_compile"] = notes[0][0]
        why = []
        for line in notes[0][1:]:
            if line.startswith("host header: "):
                how["host_header"] = line.partition(": ")[2]
            else:
                why.append(line)
        if why:  # why each lighter header did not compile it: its tier's name, then nvcc's errors
            how["cuda_why"] = "\n".join(why)[:1500]
    return {"steps_s": steps, "flags": flags, **how}


def timed_row(ev, cfg, task, path: Path, name: str) -> dict:
    """One fresh candidate through `ev`: its wall time, verdict and the steps of its build."""
    from cuda_agent.evaluate import load_candidate

    t0 = time.monotonic()
    res = ev.evaluate(task, load_candidate(path), cfg)
    return {"name": name, "wall_s": round(time.monotonic() - t0, 2), **verdict(res),
            "ninja": ninja_steps(cfg.cache_dir / "torch_extensions" / "by_source")}


def step_alone(cfg, stage: Path, tmp: Path, k: int, log: Log) -> None:
    """Each fresh candidate, then the same one with its Python edited outside the kernel (the
    agent's usual next step): a new candidate whose extension is already built."""
    from cuda_agent.evaluate import Evaluator, load_candidate

    rows, edited = [], []
    with Evaluator(cfg, jobs=1) as ev:
        t0 = time.monotonic()
        warm = ev.wait_warm(180)  # its workers started, as a running service's are (the parallel step's start too)
        log.put("alone_pool", {"warm_up_s": round(time.monotonic() - t0, 1), "warm": warm})
        for task, path, name in candidates(stage, k, tmp):
            with ProcessCpu() as cpu:
                rows.append(timed_row(ev, cfg, task, path, name))
            rows[-1]["cpu_by_kind"] = cpu.by_kind()
            log.put("alone", rows)
            again = path.with_name(f"{path.stem}_edited.py")
            again.write_text(path.read_text() + "\n# edited outside the kernel\n")
            res = ev.evaluate(task, load_candidate(again), cfg)
            edited.append({"name": name, **verdict(res)})
            log.put("edited", edited)


def step_parallel(cfg, stage: Path, tmp: Path, n: int, jobs: int, log: Log) -> None:
    from cuda_agent.evaluate import Evaluator, load_candidate

    rows = []
    with Evaluator(cfg, jobs=jobs) as ev:
        cands = candidates(stage, n, tmp)
        t0 = time.monotonic()
        warm = ev.wait_warm(180)  # a running service's state between bursts: its spares started
        warm_s = time.monotonic() - t0
        samples: list[dict] = []
        stop = threading.Event()
        with ProcessCpu() as procs:
            cpu0, t0 = cpu_busy_s(), time.monotonic()
            sampler = threading.Thread(target=sample_evaluator, args=(ev, t0, samples, stop, lambda: len(rows)),
                                       daemon=True)
            sampler.start()
            futures = {ev.submit(task, load_candidate(path), cfg): name for task, path, name in cands}
            for fut in as_completed(futures):
                res = fut.result()
                rows.append({"name": futures[fut], "done_s": round(time.monotonic() - t0, 1), **verdict(res)})
                log.put("parallel_rows", rows, quiet=True)
            wall = time.monotonic() - t0
            cpu = cpu_busy_s() - cpu0
        stop.set()
        sampler.join()
        log.put("parallel_samples", samples, quiet=True)
    lat = [r["total_s"] + r["phases_s"].get("admission", 0.0) for r in rows]
    cores = os.cpu_count() or 1
    log.put("parallel", {"jobs": jobs, "n": n, "wall_s": round(wall, 1), "per_minute": round(60 * n / wall, 2),
                         "median_latency_s": round(statistics.median(lat), 1),
                         # a steady stream at this concurrency (Little's law: jobs over the mean
                         # latency), without the batch's filling and draining
                         "steady_per_minute": round(60 * jobs / statistics.mean(lat), 2),
                         "pool_warm_up_s": round(warm_s, 1), "pool_warm": warm,
                         # workers warm and cold, second tries alone, times the pool was emptied for a task
                         "evaluator": {**ev.stats(), "reruns": ev.reruns},
                         # the machine's CPU time over the run, per candidate, and the throughput that
                         # would keep every core busy with nothing else: the CPU's floor
                         "cpu_s_per_candidate": round(cpu / n, 1), "cores": cores,
                         "cpu_bound_per_minute": round(60 * cores * n / cpu, 1) if cpu > 0 else None,
                         # that CPU time by kind of process, per candidate
                         "cpu_s_by_kind": {k: round(v / n, 2) for k, v in procs.by_kind().items()},
                         "rows": rows})


def sample_evaluator(ev, t0: float, out: list, stop: threading.Event, done) -> None:
    """Every second until `stop`: what holds the GPU's admission (the memory promised, evaluations
    on the GPU, second tries alone waiting or running), the warm pool (spares, kept judges), the
    evaluations finished, and on a GPU the memory in use, split into the pool's processes and the
    rest (nvidia-smi's compute apps)."""
    gpu = ev.gpus[0]
    pool, gate, ledger = ev.pool(gpu), ev.gate(gpu), ev.ledger(gpu)
    while not stop.wait(1.0):
        row = {"t": round(time.monotonic() - t0, 1), "done": done(), "on_gpu": gate.running,
               "solos": gate.solos, "load1": os.getloadavg()[0]}
        if ledger is not None:
            row["promised_gb"] = round(ledger.promised() / 2**30, 1)
        if pool is not None:
            with pool.lock:
                spares, judges = [w.proc.pid for w in pool.spares], [w.proc.pid for w in pool.judges]
            row["spares"], row["kept_judges"] = len(spares), len(judges)
            if gpu is not None:
                used = gpu_use_by_pid()
                row["gb_spares"] = round(sum(used.get(p, 0) for p in spares) / 1024, 1)
                row["gb_kept_judges"] = round(sum(used.get(p, 0) for p in judges) / 1024, 1)
                row["gb_all"] = round(sum(used.values()) / 1024, 1)
                row["gb_by_role"] = {k: round(v, 1) for k, v in by_name(used).items()}
                row["gb_top"] = sorted((round(v / 1024, 1) for v in used.values()), reverse=True)[:4]
        out.append(row)


def process_name(pid: int) -> str:
    """A process's command name; the evaluator's workers call themselves `ca-<role>`."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def gpu_use_by_pid() -> dict[int, int]:
    """MiB of device memory each process holds now (nvidia-smi's compute apps); none without it."""
    from cuda_agent.evaluate.device import nvidia_smi_lines

    used: dict[int, int] = {}
    for line in nvidia_smi_lines("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"):
        pid, _, mib = line.partition(",")
        try:
            used[int(pid)] = int(mib)
        except ValueError:
            continue
    return used


def by_name(used: dict[int, int]) -> dict[str, float]:
    """`gpu_use_by_pid`'s MiB summed into GiB per process name (the workers' is `ca-<role>`)."""
    out: dict[str, float] = {}
    for pid, mib in used.items():
        name = process_name(pid)
        out[name] = out.get(name, 0.0) + mib / 1024
    return out


def step_memory(cfg, stage: Path, log: Log) -> None:
    """Each staged task's candidate evaluated alone (the Evaluator's own workers, nothing beside),
    its processes' device memory sampled throughout: the peak of their sum and of each role,
    against what the ledger admits the evaluation by (`memory.need`). Where the peak is above the
    need, evaluations of that task run short of memory beside others."""
    from cuda_agent.evaluate import Evaluator, load_candidate, memory
    from cuda_agent.tasks import load_task

    index = json.loads((stage / "index.json").read_text())
    tasks = [load_task(stage / row["task"]) for row in index]
    rows = []
    with Evaluator(cfg, jobs=len(index)) as ev:
        ev.map([(task, load_candidate(stage / row["kernel"])) for task, row in zip(tasks, index)], cfg)  # builds
        ev.wait_warm(120)
        base = by_name(gpu_use_by_pid())  # the pool's spares and kept judges, before the evaluation
        for task, row in zip(tasks, index):
            peaks: dict[str, float] = {}
            total = [0.0]
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    use = by_name(gpu_use_by_pid())
                    total[0] = max(total[0], sum(use.values()) - sum(base.values()))
                    for k, v in use.items():
                        peaks[k] = max(peaks.get(k, 0.0), v)
                    stop.wait(0.1)

            th = threading.Thread(target=sample, daemon=True)
            need = memory.need(cfg.cache_dir, task.source) / 2**30  # what this evaluation was admitted by
            th.start()
            res = ev.evaluate(task, load_candidate(stage / row["kernel"]), cfg)
            stop.set()
            th.join()
            recorded = json.loads(memory._path(cfg.cache_dir, task.source).read_text()).get("peak", 0) / 2**30
            rows.append({"problem": row["problem"], "correct": res.correct, "need_gb": round(need, 1),
                         "peak_gb": round(total[0], 1), "recorded_peak_gb": round(recorded, 1),
                         "by_role_gb": {k: round(v, 1) for k, v in sorted(peaks.items())}})
            log.put("memory", rows, quiet=True)
            print(f"  p{row['problem']}: need {need:.1f} GiB, peak {total[0]:.1f} GiB beyond the pool "
                  f"(the processes say {recorded:.1f}), by role {rows[-1]['by_role_gb']}", flush=True)


def cpu_busy_s() -> float:
    """CPU-seconds the whole machine has spent busy since boot (/proc/stat: all but idle and
    iowait), 0.0 where that cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class ProcessCpu:
    """CPU-seconds by kind of process over a span (a `with` block): /proc sampled every `period`
    seconds in a thread, each process's user + system time at the last sample it was seen, less
    what it had spent at the first sample for those already running. Processes that live less than
    `period` are missed and those that end lose their last interval: the sum of `by_kind` against
    the machine's busy time (`cpu_busy_s`) shows how much. Kinds: the compilers of a build by their input (gcc -E,
    the host unit, nvcc's final host compile, header builds), CUDA's tools by name, our Python
    processes by role."""

    def __init__(self, period: float = 0.1):
        self.period, self.seen = period, {}
        self.stop, self.thread = threading.Event(), threading.Thread(target=self._run, daemon=True)
        self.tck = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def kind(pid: str, comm: str) -> str:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            argv = []
        args = [a.decode(errors="replace") for a in argv]
        if comm == "cc1plus":
            if "-E" in args:
                return "cc1plus -E (nvcc's preprocessing)"
            if any(a.endswith(".cudafe1.cpp") for a in args):
                return "cc1plus: nvcc's final host compile"
            if "c++-header" in args or any(a.endswith(".gch") for a in args):  # (the host unit names its header: -include)
                return "cc1plus: precompiled header builds"
            if any(a.endswith(".cpp") for a in args):
                return "cc1plus: the host unit"
            return "cc1plus (other)"
        if comm.startswith("ca-"):  # the evaluator's workers name themselves by role (worker/common.py)
            return f"python: {comm[3:]}"
        if comm.startswith("python"):
            line = " ".join(args)
            for needle, role in (("light_nvcc", "python: light_nvcc wrapper"), ("zygote", "python: zygote and forked workers"),
                                 ("cuda_agent.evaluate.worker", "python: workers"), ("build_child", "python: build child"),
                                 ("fresh.py", "python: harness (Evaluator, pool)")):
                if needle in line:
                    return role
            return "python (other)"
        return comm

    def _scan(self, first: bool) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            close = stat.rindex(")")
            rest = stat[close + 2:].split()
            cpu = (int(rest[11]) + int(rest[12])) / self.tck
            key = (entry.name, rest[19])  # pid and start time: a pid reused is another process
            comm = stat[stat.index("(") + 1:close]
            if key in self.seen:
                seen = self.seen[key]
                seen[1] = cpu
                if seen[3] != comm:  # a spare took its role (or a process exec'd another program)
                    seen[0], seen[3] = self.kind(entry.name, comm), comm
            else:
                self.seen[key] = [self.kind(entry.name, comm), cpu, cpu if first else 0.0, comm]

    def _run(self) -> None:
        while not self.stop.wait(self.period):
            self._scan(False)

    def __enter__(self):
        self._scan(True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self._scan(False)

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, last, base, _ in self.seen.values():
            if last > base:
                out[kind] = out.get(kind, 0.0) + last - base
        return dict(sorted(((k, round(v, 1)) for k, v in out.items() if v >= 0.05), key=lambda kv: -kv[1]))


KB_METHOD = r'''
import json, os, sys, time
t0 = time.monotonic()
import torch
t_torch = time.monotonic() - t0
task_src, cand_src = open(sys.argv[1]).read(), open(sys.argv[2]).read()
ctx_ref, ctx_new = {}, {}
exec(compile(task_src, sys.argv[1], "exec"), ctx_ref)
t1 = time.monotonic()
exec(compile(cand_src, sys.argv[2], "exec"), ctx_new)  # load_inline builds here
t_build = time.monotonic() - t1
dev = torch.device("cuda")
init = ctx_ref["get_init_inputs"]()
torch.manual_seed(42); ref = ctx_ref["Model"](*init).to(dev)
torch.manual_seed(42); new = ctx_new["ModelNew"](*init).to(dev)
correct = True
gen = torch.Generator().manual_seed(42)
with torch.no_grad():
    for trial in range(5):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ctx_ref["get_inputs"]()]
        a, b = ref(*xs), new(*xs)
        torch.cuda.synchronize()
        correct &= a.shape == b.shape and torch.allclose(a, b, atol=1e-2, rtol=1e-2)
    times = []
    if correct:
        xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ctx_ref["get_inputs"]()]
        for _ in range(3):
            new(*xs)
        torch.cuda.synchronize()
        for _ in range(100):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); new(*xs); e.record(); torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
print(json.dumps({"torch_import_s": round(t_torch, 2), "build_s": round(t_build, 2), "correct": bool(correct),
                  "mean_ms": sum(times) / len(times) if times else None, "total_s": round(time.monotonic() - t0, 2)}))
'''


def kb_one(task_path: str, cand: Path, ext_dir: Path) -> dict:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir)}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", KB_METHOD, task_path, str(cand)], capture_output=True, text=True,
                         env=env, timeout=900)
    row = {"wall_s": round(time.monotonic() - t0, 2)}
    try:
        row.update(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        row["error"] = out.stderr[-600:]
    row["ninja"] = ninja_steps(ext_dir)
    return row


def step_kernelbench(stage: Path, tmp: Path, k: int, n: int, jobs: int, log: Log) -> None:
    alone = []
    for task, path, name in candidates(stage, k, tmp):
        alone.append({"name": name, **kb_one(task.origin, path, tmp / f"kb_{name}")})
        log.put("kernelbench_alone", alone)
    cands = candidates(stage, n, tmp)
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        rows = list(pool.map(lambda c: {"name": c[2], **kb_one(c[0].origin, c[1], tmp / f"kb_{c[2]}")}, cands))
    wall = time.monotonic() - t0
    log.put("kernelbench_parallel", {"jobs": jobs, "n": n, "wall_s": round(wall, 1),
                                     "per_minute": round(60 * n / wall, 2),
                                     "median_latency_s": round(statistics.median(r["wall_s"] for r in rows), 1),
                                     "rows": rows})


def baselines_source(stdout: str) -> str | None:
    """Where the baselines of a `cuda-agent eval --json` result came from: cached or measured."""
    try:
        return ((json.loads(stdout).get("timing_check") or {}).get("baselines") or {}).get("source")
    except (ValueError, AttributeError):
        return None


def timed_cli(args: list[str], env: dict, repeat: int, warm_ups: int = 1) -> dict:
    """The median wall time of `cuda-agent ARGS` over `repeat` runs after warming up: one run, or
    for an `eval --json`, up to `warm_ups` runs until its baselines come from the cache (a busy
    machine can leave them too noisy to cache for a few evaluations)."""
    def once():
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "cuda_agent", *args], capture_output=True, text=True, env=env,
                             timeout=600)
        return out, time.monotonic() - t0

    for warmed in range(1, warm_ups + 1):
        out, _ = once()
        if baselines_source(out.stdout) in (None, "cached"):
            break
    walls, sources = [], []
    for _ in range(repeat):
        out, wall = once()
        walls.append(wall)
        sources.append(baselines_source(out.stdout))
    return {"median_s": round(statistics.median(walls), 2), "walls_s": [round(w, 2) for w in walls],
            "warm_ups": warmed, "baselines": sources, "rc": out.returncode,
            "how": out.stderr.strip().splitlines()[:1], "stdout_tail": out.stdout[-300:]}


def timed_edits(ws: Path, env: dict, repeat: int) -> dict:
    """`cuda-agent workspace compile` after an edit to one kernel (not a binding): the median of
    `repeat` runs, each after a new comment, once a first build of the edited workspace is done."""
    kernel = next(k for k in sorted((ws / "kernels").iterdir())
                  if k.suffix in (".cu", ".cpp") and not k.stem.endswith("_binding"))
    text, walls = kernel.read_text(), []
    for i in range(repeat + 1):
        kernel.write_text(text + f"\n// edit {secrets.token_hex(8)}\n")
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "cuda_agent", "workspace", "compile", str(ws)],
                             capture_output=True, text=True, env=env, timeout=600)
        if i:
            walls.append(time.monotonic() - t0)
    kernel.write_text(text)
    return {"median_s": round(statistics.median(walls), 2), "walls_s": [round(w, 2) for w in walls],
            "kernel": kernel.name, "rc": out.returncode, "stdout_tail": out.stdout[-300:]}


def step_service(cfg, tmp: Path, repeat: int, log: Log) -> None:
    from cuda_agent.evaluate.service import running
    from cuda_agent.examples import get_example

    sock = Path(tempfile.mkdtemp(prefix="ca-fresh-")) / "s.sock"
    env = {**os.environ, "CUDA_AGENT_SOCKET": str(sock), "CUDA_AGENT_CACHE": str(cfg.cache_dir)}
    ex = get_example("elementwise")
    single = ex.candidates(cfg.device)["single"]
    ws = tmp / "ws"
    subprocess.run([sys.executable, "-m", "cuda_agent", "init-workspace", str(ex.task), str(ws), "--device",
                    cfg.device], check=True, capture_output=True, env=env)
    shutil.copytree(ex.candidates(cfg.device)["workspace"], ws, dirs_exist_ok=True)
    out = {}
    with running(cfg, sock):
        out["eval_cached"] = timed_cli(["eval", str(ex.task), str(single), "--device", cfg.device, "--json"], env,
                                       repeat, warm_ups=6)
        log.put("service", out)
        for command in ("verify", "profile"):
            out[f"workspace_{command}"] = timed_cli(["workspace", command, str(ws)], env, repeat)
            log.put("service", out)
        out["workspace_compile_edited"] = timed_edits(ws, env, repeat)
        log.put("service", out)
    out["eval_cached_in_process"] = timed_cli(["eval", str(ex.task), str(single), "--device", cfg.device, "--json",
                                               "--service", "off"], env, 1)
    log.put("service", out)


def cached_tasks(cfg, tasks: list, device: dict | None) -> list:
    """The tasks whose cache holds both their baselines for this GPU and `cfg` (the entry an
    evaluation on `device`, as `device_info` describes it, would look up) and their memory record:
    an evaluation of those would only find them there. None of them where `device` is unknown."""
    from cuda_agent.evaluate import memory
    from cuda_agent.evaluate.baselines import BaselineCache, baseline_key
    from cuda_agent.evaluate.cache_layout import BASELINES

    if not device:
        return []
    key = baseline_key(device, cfg.batch_calls, cfg.compile_baseline, cfg.touch)
    cache = BaselineCache(cfg.cache_dir / BASELINES)
    return [t for t in tasks if cache.get(t.source, key) is not None and memory.need(cfg.cache_dir, t.source) > 0]


def gpu_description() -> dict | None:
    """`device_info("cuda")` as a judge would report it, from a child process (so that this one
    holds no CUDA context beside the evaluations), or None where it cannot be had."""
    code = "import json; from cuda_agent.evaluate.device import device_info; print(json.dumps(device_info('cuda')))"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def baselines_first(cfg, stage: Path, jobs: int, count: int, log: Log) -> None:
    """The baselines of the first `count` staged tasks (those the steps use) into the cache (not
    counted). On a GPU, tasks whose baselines and memory record the cache already holds (carried in
    .fresh/cache.tgz) are not evaluated again: on a fresh machine that check cost 60-127 s."""
    import dataclasses

    from cuda_agent.evaluate import Evaluator
    from cuda_agent.evaluate.baselines import baseline_candidate
    from cuda_agent.tasks import load_task

    tasks = [load_task(stage / r["task"]) for r in json.loads((stage / "index.json").read_text())[:count]]
    t0 = time.monotonic()
    found = cached_tasks(cfg, tasks, gpu_description() if str(cfg.device).startswith("cuda") else None)
    left = [t for t in tasks if t not in found]
    res = []
    if left:
        ref_cfg = dataclasses.replace(cfg, policy="none", trials=1, stress_trials=0)
        with Evaluator(ref_cfg, jobs=jobs) as ev:
            res = ev.map([(t, baseline_candidate(t.source, "eager")) for t in left], ref_cfg)
    log.put("baselines", {"tasks": len(tasks), "s": round(time.monotonic() - t0, 1), "found_in_cache": len(found),
                          "cached": len(found) + sum(bool((r.timing_check or {}).get("baselines", {}).get("cached", True))
                                                     for r in res)})


def headers_first(cfg, stage: Path, tmp: Path, log: Log) -> None:
    """Where the cache holds no precompiled headers yet, two fresh variants of the first staged
    kernel, one after the other (not counted): the first builds torch/extension.h's for the host
    unit, the second the CUDA unit's headers' for nvcc's final compile (built at their second
    sighting). Like the baselines, they are built once per machine and flags, not per candidate."""
    from cuda_agent.evaluate import Evaluator
    from cuda_agent.evaluate.cache_layout import PCH
    from cuda_agent.evaluate.worker.inline_build import nvcc_pch_root

    pch = cfg.cache_dir / PCH
    if not cfg.inline_pch or not str(cfg.device).startswith("cuda") or (
            any(pch.glob("*/*.gch")) and any(nvcc_pch_root(pch).glob("*/*.gch"))):
        return
    rows, t0 = [], time.monotonic()
    with Evaluator(cfg, jobs=1) as ev:
        for _ in range(2):
            [(task, path, name)] = candidates(stage, 1, tmp)
            rows.append(timed_row(ev, cfg, task, path, name))
    log.put("headers", {"s": round(time.monotonic() - t0, 1), "rows": rows})


def build_steps(t, rows) -> None:
    """Rows of the table: the median time of each step of the builds (ninja's log) in `rows`."""
    steps: dict[str, list[float]] = {}
    for r in rows:
        for target, secs in (r.get("ninja") or {}).get("steps_s", {}).items():
            kind = "nvcc (the CUDA unit)" if target.endswith(".cuda.o") else \
                "the host unit" if target.endswith(".o") else "the link"
            steps.setdefault(kind, []).append(secs)
    for kind, vals in steps.items():
        t.add_row(f"    build step: {kind} (median of {len(vals)})", f"{statistics.median(vals):.1f} s", "")
    hows = [h for r in rows if (h := (r.get("ninja") or {}).get("cuda_compile"))]
    if hows:  # light_nvcc.py's note: which light torch/extension.h compiled the unit, or its source as written
        t.add_row("    CUDA units compiled with a light torch/extension.h: tensor / light",
                  f"{hows.count('tensor')} / {hows.count('light')} of {len(hows)}", "")
    headers = [h for r in rows if (h := (r.get("ninja") or {}).get("host_header"))]
    if headers:  # nvcc_pch.py: the final host compile's precompiled header
        t.add_row("    nvcc's final compile: precompiled header used / built",
                  f"{headers.count('used')} / {headers.count('built')} of {len(hows)}", "")


def table(doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    def med(rows, key="total_s"):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return f"{statistics.median(vals):.1f} s" if vals else "-"

    t = Table(title="fresh candidates (targets from the \\[fresh] issue)", title_justify="left")
    for col in ("figure", "measured", "target"):
        t.add_column(col)
    if h := doc.get("headers"):
        t.add_row("precompiled headers built first: two warm-up candidates (not counted)",
                  " + ".join(f"{r['total_s']:.1f} s" for r in h["rows"] if r.get("total_s") is not None), "")
    if a := doc.get("alone"):
        ok = sum(r["correct"] for r in a)
        t.add_row(f"fresh candidate alone, full evaluation (median of {len(a)}, {ok} correct)", med(a), "<= 20 s")
        if (pool := doc.get("alone_pool")) and pool.get("warm"):
            t.add_row("  its workers started first (not counted)", f"{pool['warm_up_s']} s", "")
        for phase in ("load", "correctness", "timing"):
            vals = [r["phases_s"].get(phase, 0) for r in a]
            t.add_row(f"  of which {phase}", f"{statistics.median(vals):.1f} s", "")
        build_steps(t, a)
    if e := doc.get("edited"):
        t.add_row(f"the same kernel, its Python edited (median of {len(e)})", med(e), "")
    if p := doc.get("parallel"):
        ok = sum(r["correct"] for r in p["rows"])
        t.add_row(f"fresh, {p['jobs']} at a time: median latency ({p['n']}, {ok} correct)",
                  f"{p['median_latency_s']} s", "<= 30 s")
        t.add_row(f"fresh throughput, {p['jobs']} at a time", f"{p['per_minute']} / min", ">= 20 / min")
        if p.get("steady_per_minute"):
            t.add_row("  a steady stream at that concurrency (jobs / mean latency)", f"{p['steady_per_minute']} / min", "")
        retried = sum(any(n.startswith("retried_alone") for n in r.get("notes", [])) for r in p["rows"])
        samples = doc.get("parallel_samples") or []
        peak = max((x.get("gb_all", 0) for x in samples), default=None)
        t.add_row("  retried alone (short of a resource beside others)" +
                  (f"; GPU memory of its processes at most {peak} GB" if peak else ""), f"{retried} of {len(p['rows'])}", "")
        if p.get("cpu_bound_per_minute"):
            t.add_row(f"  the CPU's floor: {p['cpu_s_per_candidate']} CPU-s per candidate on {p['cores']} cores",
                      f"{p['cpu_bound_per_minute']} / min at most", "")
        kinds = list((p.get("cpu_s_by_kind") or {}).items())
        if kinds:
            t.add_row(f"    of which, by process (accounted {sum(v for _, v in kinds):.1f} CPU-s)", "", "")
            for kind, secs in kinds[:10]:
                t.add_row(f"      {kind}", f"{secs:.1f} CPU-s", "")
    if k := doc.get("kernelbench_alone"):
        t.add_row(f"KernelBench's method, alone (median of {len(k)})", med(k, "wall_s"), "")
        t.add_row("  of which its load_inline build", med(k, "build_s"), "")
        build_steps(t, k)
    if k := doc.get("kernelbench_parallel"):
        t.add_row(f"KernelBench's method, {k['jobs']} at a time: median latency", f"{k['median_latency_s']} s", "")
        t.add_row("KernelBench's method, throughput", f"{k['per_minute']} / min", "")
    for m in doc.get("memory") or []:
        t.add_row(f"device memory, p{m['problem']} alone: peak beyond the pool (recorded) / the ledger's need before",
                  f"{m['peak_gb']} ({m.get('recorded_peak_gb')}) / {m['need_gb']} GiB", "peak <= need")
    if s := doc.get("service"):
        for key, label, target in (("eval_cached", "service: cuda-agent eval of a cached candidate", "<= 3 s (H200)"),
                                   ("workspace_verify", "service: workspace verify, unchanged code", "<= 2 s"),
                                   ("workspace_profile", "service: workspace profile, unchanged code", "<= 3 s"),
                                   ("workspace_compile_edited", "workspace compile, one kernel edited", ""),
                                   ("eval_cached_in_process", "in-process: cuda-agent eval, cached", "")):
            if key in s:
                r = s[key]
                cached = f", baselines cached {r['baselines'].count('cached')}/{len(r['baselines'])}" \
                    if any(r.get("baselines") or []) else ""
                t.add_row(label, f"{r['median_s']} s (rc {r['rc']}{cached})", target)
    Console(width=150).print(t)


def cmd_run(args: argparse.Namespace) -> int:
    from cuda_agent.evaluate import EvalConfig
    from cuda_agent.evaluate.device import resolve_device

    steps = [s for s in args.steps.split(",") if s]
    if bad := set(steps) - set(STEPS):
        sys.exit(f"fresh.py: unknown steps {sorted(bad)}; use {','.join(STEPS)}")
    if not (args.stage / "index.json").is_file():
        sys.exit(f"fresh.py: {args.stage}/index.json missing: run `python benchmarks/fresh.py stage` first")
    cfg = EvalConfig(device=resolve_device(args.device), policy="kernelbench",
                     cache_dir=args.cache_dir or Path(tempfile.mkdtemp(prefix="fresh-cache-")),
                     **({} if args.tensor_header is None else {"inline_tensor_header": args.tensor_header}))
    log = Log(args.json)
    tmp = Path(tempfile.mkdtemp(prefix="fresh-"))
    log.put("config", {"device": cfg.device, "cache_dir": str(cfg.cache_dir), "steps": steps, "n": args.n,
                       "jobs": args.jobs, "alone": args.alone, "tensor_header": cfg.inline_tensor_header,
                       "warm_up": args.warm_up})
    if {"alone", "parallel", "memory"} & set(steps) and args.warm_up:
        baselines_first(cfg, args.stage, args.jobs, max(args.alone if "alone" in steps else 0,
                                                          args.n if "parallel" in steps else 0,
                                                          10**6 if "memory" in steps else 0), log)
        headers_first(cfg, args.stage, tmp, log)
    for step in steps:
        t0 = time.monotonic()
        if step == "alone":
            step_alone(cfg, args.stage, tmp, args.alone, log)
        elif step == "parallel":
            step_parallel(cfg, args.stage, tmp, args.n, args.jobs, log)
        elif step == "kernelbench":
            step_kernelbench(args.stage, tmp, args.alone, args.kb_n or args.jobs, args.jobs, log)
        elif step == "service":
            step_service(cfg, tmp, args.repeat, log)
        elif step == "memory":
            step_memory(cfg, args.stage, log)
        log.put(f"{step}_step_s", round(time.monotonic() - t0, 1))
    table(log.doc)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    doc: dict = {}
    for path in args.files:
        try:
            doc.update(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            sys.exit(f"fresh.py: {path}: not a --json file of `fresh.py run` ({exc})")
    table(doc)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage", help="copy the chosen corpus kernels and their tasks to --out")
    s.add_argument("--corpus", type=Path, default=CORPUS)
    s.add_argument("--tasks", type=int, default=12, help="distinct tasks (default 12)")
    s.add_argument("--out", type=Path, default=STAGE)
    s.set_defaults(func=cmd_stage)
    r = sub.add_parser("run", help="measure (on the GPU machine)")
    r.add_argument("--stage", type=Path, default=STAGE)
    r.add_argument("--device", default="auto")
    r.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {','.join(STEPS)}")
    r.add_argument("--alone", type=int, default=3, help="fresh candidates one at a time (default 3)")
    r.add_argument("--n", type=int, default=16, help="fresh candidates for the throughput (default 16)")
    r.add_argument("--kb-n", type=int, default=None, help="candidates of KernelBench's method at once (default --jobs)")
    r.add_argument("--jobs", type=int, default=8, help="at a time (default 8)")
    r.add_argument("--repeat", type=int, default=3, help="runs of each service command after the warm-up (default 3)")
    r.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh one")
    r.add_argument("--tensor-header", action=argparse.BooleanOptionalAction, default=None,
                   help="CUDA units try the tensor header first (EvalConfig.inline_tensor_header; default: its default, on)")
    r.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=True,
                   help="check the tasks' baselines and build the precompiled headers before the steps (default); "
                        "--no-warm-up leaves both to the steps' own evaluations, for a short device call "
                        "whose cache was unpacked from .fresh/cache.tgz")
    r.add_argument("--json", type=Path, default=None, help="write every figure here as it is measured")
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("table", help="one table from the --json files of several runs (a later file's steps win)")
    t.add_argument("files", type=Path, nargs="+")
    t.set_defaults(func=cmd_table)
    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
