"""Our verdicts against KernelBench's on real model-written kernels (../shared/corpora/kernelbench-a100-runs).

    python benchmarks/corpus.py select                  # which kernels: docs/measured/corpus-selection.jsonl
    python benchmarks/corpus.py stage                   # tasks + selected kernels into .corpus/ (git-ignored)
    python benchmarks/corpus.py run --deadline 3000     # `cuda-agent bench` per corpus run, resumable
    python benchmarks/corpus.py report                  # docs/measured/<date>-corpus/report.md + rows.jsonl

On the GPU machine (our package is not installed there, the corpus is not reachable; everything is
in .corpus/, which the call carries both ways, and the stores come back through $OUT):

    device run: bash benchmarks/device_corpus.sh   (carry .corpus)
    then here:  python benchmarks/corpus.py restore --from FILES_AT && python benchmarks/corpus.py report

1. `select`: every kernel KernelBench judged correct, and `--incorrect N` of those it judged incorrect
   (its verdict `correct` false; a null verdict is never chosen), sampled per corpus run in
   proportion to the run's incorrect kernels, with a fixed `--seed`: the same arguments give the same
   selection.
2. `stage`: the corpus's task files (`tasks/levelL/`) and, per corpus run, a solutions folder holding
   only the selected kernels in KernelBench's run layout, plus `selection.jsonl` (what was staged).
3. `run`: one `cuda-agent bench` per corpus run (level 1 runs first: they are the quickest), each
   into its own store `.corpus/runs/RUN.sqlite`; a second `run` resumes where the first stopped.
   The next run's bench starts beside the running one once that one has fewer kernels left than
   `--jobs` (at most two at once), so a run's slowest kernels do not leave the other slots idle.
   `--deadline S`: `run` returns within S seconds: no bench starts with less than `--min-left`
   seconds to go, the one running gets SIGTERM (bench's Ctrl-C) `--grace` seconds before the
   deadline: it drops the evaluations queued, stores those running as they finish and exits; it is
   killed at the deadline if it has not (its store keeps every verdict committed).
   Tasks of a level without a selected kernel count as `no_solution` in bench's own metrics; the
   comparison here leaves them out.
4. `report`: the selection joined with the stores by (run, level, problem): coverage, the agreement
   table (overall and per run), the KernelBench-correct kernels we reject by reason code and kind
   (the share rejected by a rule, kind `policy`, has a 2% target), every disagreement with a
   `classification` column merged from the hand-edited `classification.md` beside the report (a
   template is written when there is none; it is never overwritten), and the joined rows as
   `rows.jsonl`.
5. `forget [--codes C,..] [--infra]`: drop the stored verdicts with those reason codes (default
   out_of_memory) or of kind infra, so the next `run` evaluates them again: verdicts that runs
   made before the GPU's gate held across processes (two benches at once) may owe them to a neighbour.
6. `pack --to FILE`: the stores (copied through SQLite's backup, so a store that bench is writing
   is packed whole), bench's logs and the tasks' memory needs into one tar.gz, written beside and
   renamed into place: device_corpus.sh packs every minute, so a call cut short still returns what
   it did.
7. `restore --from PATH`: the stores a device call returned (its corpus-runs.tar.gz, or a folder
   holding it or *.sqlite files) into .corpus/runs, and the tasks' memory needs into
   .corpus/memory, so `report` reads them and the next call carries them. A store with fewer
   verdicts than the one here is not taken unless --force.

Relative paths in arguments are taken from the repository root, wherever the script is started.
Each subcommand has --help with an example.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the GPU machine has the source tree, not the installed package

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from cuda_agent.bench.solutions import KB_RUN_FILE  # noqa: E402
from cuda_agent.bench.store import Store  # noqa: E402
from cuda_agent.errors import UsageError  # noqa: E402
from cuda_agent.evaluate.config import DEVICES, POLICIES  # noqa: E402

CORPUS = Path("../shared/corpora/kernelbench-a100-runs")  # relative to the repository root
SELECTION = Path("docs/measured/corpus-selection.jsonl")
STAGED = Path(".corpus")
POLICY_TARGET = 0.02  # at most 2% of the KernelBench-correct kernels rejected by a rule
console = Console(width=160) if not sys.stdout.isatty() else Console()


class Stop(Exception):
    """A bad input: the message says what happened and what to do."""


def at_root(path: Path) -> Path:
    """A path as given on the command line, relative to the repository root unless absolute."""
    return path if path.is_absolute() else ROOT / path


def shown(path: Path) -> str:
    """`path` relative to the repository root where it lies inside it (bench's run parameters hold
    the paths as given, so they must read the same here and on the GPU machine)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path.resolve())


def read_jsonl(path: Path, what: str, hint: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise Stop(f"{shown(path)}: no {what} here; {hint}")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise Stop(f"{shown(path)}:{n}: not JSON ({exc}); regenerate the file") from None
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run_order(rows: list[dict[str, Any]]) -> list[str]:
    """Corpus runs, lowest level first (level 1 kernels are the quickest to evaluate), then by name."""
    levels: dict[str, int] = {}
    for r in rows:
        levels[r["run"]] = min(levels.get(r["run"], 99), r["level"])
    return sorted(levels, key=lambda run: (levels[run], run))


def named(file: str) -> tuple[int | None, int] | None:
    """(level, problem) of a corpus file: KernelBench's run layout, or `problem_P_kernel.py` (the
    opus4 runs, whose folder names the level)."""
    name = Path(file).name
    m = KB_RUN_FILE.match(name)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^problem_(\d+)_kernel\.py$", name)
    return (None, int(m.group(1))) if m else None


def staged_name(row: dict[str, Any]) -> str:
    return f"level_{row['level']}_problem_{row['problem']}_sample_0_kernel.py"


def kb_correct(row: dict[str, Any]) -> bool | None:
    return None if row["kernelbench"] is None else bool(row["kernelbench"]["correct"])


# -- select ---------------------------------------------------------------------------------------

def quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """`n` split over the runs in proportion to `sizes` (largest remainders; ties by run name)."""
    total = sum(sizes.values())
    exact = {run: n * size / total for run, size in sizes.items()}
    out = {run: int(x) for run, x in exact.items()}
    for run in sorted(exact, key=lambda r: (out[r] - exact[r], r))[:n - sum(out.values())]:
        out[run] += 1
    return out


def cmd_select(args: argparse.Namespace) -> int:
    corpus = at_root(args.corpus)
    rows = read_jsonl(corpus / "verdicts.jsonl", "verdicts.jsonl", "pass --corpus, the kernelbench-a100-runs folder")
    for r in rows:
        if named(r["file"]) not in ((r["level"], r["problem"]), (None, r["problem"])):
            raise Stop(f"{corpus}/verdicts.jsonl: {r['file']} does not name level {r['level']} problem "
                       f"{r['problem']}; the corpus is damaged, copy it again")
    incorrect: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if kb_correct(r) is False:
            incorrect.setdefault(r["run"], []).append(r)
    available = sum(len(v) for v in incorrect.values())
    if not 0 <= args.incorrect <= available:
        raise Stop(f"--incorrect {args.incorrect}: the corpus has {available} kernels KernelBench judged incorrect")
    if args.incorrect < 100:
        console.print(f"[yellow]--incorrect {args.incorrect}: fewer than 100, too few for the comparison[/]")
    share = quotas({run: len(v) for run, v in incorrect.items()}, args.incorrect)
    chosen = {id(r) for r in rows if kb_correct(r)}
    for run, candidates in incorrect.items():
        rng = random.Random(f"{args.seed}:{run}")  # per run: adding a run elsewhere changes nothing here
        chosen |= {id(r) for r in rng.sample(sorted(candidates, key=lambda r: r["problem"]), share[run])}
    order = {run: i for i, run in enumerate(run_order(rows))}
    selected = sorted((r for r in rows if id(r) in chosen), key=lambda r: (order[r["run"]], r["problem"]))
    out = at_root(args.out)
    write_jsonl(out, [{k: r[k] for k in ("run", "level", "problem", "file", "kernelbench")} for r in selected])
    table = Table("run", "level", "kernels", "KB correct", "KB incorrect", "selected incorrect", "selected",
                  title=f"{shown(out)}: {len(selected)} kernels (seed {args.seed})", title_justify="left")
    for run in run_order(rows):
        mine = [r for r in rows if r["run"] == run]
        table.add_row(run, str(mine[0]["level"]), str(len(mine)), str(sum(kb_correct(r) is True for r in mine)),
                      str(len(incorrect.get(run, []))), str(share.get(run, 0)),
                      str(sum(id(r) in chosen for r in mine)))
    console.print(table)
    return 0


# -- stage ----------------------------------------------------------------------------------------

def cmd_stage(args: argparse.Namespace) -> int:
    corpus, dest = at_root(args.corpus), at_root(args.dest)
    rows = read_jsonl(at_root(args.selection), "selection", "run `select` first (or pass --selection)")
    if args.runs:
        wanted = set(args.runs.split(","))
        unknown = wanted - {r["run"] for r in rows}
        if unknown:
            raise Stop(f"--runs: {', '.join(sorted(unknown))} not in the selection; choose from "
                       f"{', '.join(run_order(rows))}")
        rows = [r for r in rows if r["run"] in wanted]
    if args.limit:
        kept: Counter = Counter()
        for r in rows:
            kept[r["run"]] += 1
            r["_keep"] = kept[r["run"]] <= args.limit
        rows = [{k: v for k, v in r.items() if k != "_keep"} for r in rows if r["_keep"]]
    for r in rows:
        if not (corpus / r["file"]).is_file():
            raise Stop(f"{corpus / r['file']}: selected but missing; pass --corpus, the kernelbench-a100-runs folder")
    (dest / "tasks").mkdir(parents=True, exist_ok=True)
    for level in sorted({r["level"] for r in rows}):
        src, dst = corpus / "tasks" / f"level{level}", dest / "tasks" / f"level{level}"
        if not src.is_dir():
            raise Stop(f"{src}: no task files for level {level}; pass --corpus, the kernelbench-a100-runs folder")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
    solutions = dest / "solutions"
    shutil.rmtree(solutions, ignore_errors=True)  # nothing but the selection: a stale kernel would be benched
    for r in rows:
        target = solutions / r["run"] / staged_name(r)  # KernelBench's run layout, whatever the corpus calls it
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / r["file"], target)
    write_jsonl(dest / "selection.jsonl", rows)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(dest)], cwd=ROOT, capture_output=True)
    if dest.resolve().is_relative_to(ROOT) and ignored.returncode == 1:
        console.print(f"[yellow]{shown(dest)} is not ignored by git; add /{shown(dest)}/ to .gitignore[/]")
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file() and "runs" not in p.relative_to(dest).parts)
    console.print(f"staged {len(rows)} kernels of {len({r['run'] for r in rows})} runs and the tasks of levels "
                  f"{', '.join(str(lv) for lv in sorted({r['level'] for r in rows}))} into {shown(dest)} "
                  f"({size / 2**20:.1f} MiB, stores under {shown(dest / 'runs')} kept)")
    return 0


# -- run ------------------------------------------------------------------------------------------

def problem_of(task_id: str) -> int | None:
    """`level1/19_ReLU` -> 19 (KernelBench task files are named <problem>_<Name>.py)."""
    m = re.match(r"(\d+)_", task_id.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def stored(db: Path, run: str, wanted: set[tuple[int, int]]) -> int:
    """How many of the (level, problem) pairs `wanted` have a verdict of `run` in the store `db`."""
    if not db.is_file():
        return 0
    with Store(db) as store:
        params = store.run_params(run)
        if params is None:
            return 0
        level = {t: lv for t, lv in params["tasks"]}
        return sum((level.get(t), problem_of(t)) in wanted for t, _ in store.done(run))


def cmd_run(args: argparse.Namespace) -> int:
    staged = at_root(args.staged)
    runs_dir = at_root(args.runs_dir) if args.runs_dir else staged / "runs"
    rows = read_jsonl(staged / "selection.jsonl", "staged selection", "run `stage` first (or pass --staged)")
    cli = shlex.split(args.cli)
    if not cli or shutil.which(cli[0]) is None:
        raise Stop(f"--cli {args.cli!r}: {cli[0] if cli else 'nothing'} is not on PATH; where the package is not "
                   "installed, pass --cli 'python3 -m cuda_agent' with PYTHONPATH=src")
    runs = run_order(rows)
    if args.runs:
        unknown = set(args.runs.split(",")) - set(runs)
        if unknown:
            raise Stop(f"--runs: {', '.join(sorted(unknown))} not staged; staged: {', '.join(runs)}")
        runs = [r for r in runs if r in args.runs.split(",")]
    todo = {run: {(r["level"], r["problem"]) for r in rows if r["run"] == run} for run in runs}
    total = sum(len(v) for v in todo.values())
    t0 = time.monotonic()
    end = t0 + args.deadline if args.deadline else None
    done = {run: stored(runs_dir / f"{run}.sqlite", run, todo[run]) for run in runs}
    if args.group:
        runs = group_of(runs, {run: len(todo[run]) - done[run] for run in runs}, *args.group)
        todo = {run: todo[run] for run in runs}
        done = {run: done[run] for run in runs}
        total = sum(len(v) for v in todo.values())
    failed = []
    console.print(f"{sum(done.values())} of {total} staged kernels already have a verdict in {shown(runs_dir)}")
    queue = [run for run in runs if done[run] < len(todo[run])]
    active: list[Bench] = []
    jobs = args.jobs or 2  # bench's own default on one GPU
    stopping = False
    try:
        while (queue and not stopping) or active:
            # The next run starts when none is running, or beside the last one's tail: when the
            # running bench has fewer kernels left than it has jobs, its free slots would idle.
            left_active = sum(len(todo[b.run]) - done[b.run] for b in active)
            if queue and not stopping and (not active or (len(active) < 2 and left_active < jobs)):
                if end is not None and end - args.grace - time.monotonic() < args.min_left:
                    console.print(f"deadline: not starting {queue[0]} ({end - time.monotonic():.0f} s left)")
                    stopping = True
                    continue
                run = queue.pop(0)
                levels = sorted({lv for lv, _ in todo[run]})
                db = runs_dir / f"{run}.sqlite"
                cmd = cli + ["bench", shown(staged / "tasks"), "--solutions", shown(staged / "solutions" / run),
                             "--level", *map(str, levels), "--run", run, "--out", shown(runs_dir), "--db",
                             shown(db), "--no-report", "--policy", args.policy, "--device", args.device,
                             "--timeout", str(args.timeout)]
                cmd += (["--jobs", str(args.jobs)] if args.jobs else []) + \
                       (["--cache-dir", str(args.cache_dir)] if args.cache_dir else []) + args.bench_args
                console.print(f"[{time.monotonic() - t0:4.0f} s] {run} ({runs.index(run) + 1}/{len(runs)}): "
                              f"{done[run]}/{len(todo[run])} stored; all runs {sum(done.values())}/{total}",
                              highlight=False)
                runs_dir.mkdir(parents=True, exist_ok=True)
                active.append(Bench(run, cmd, runs_dir / f"{run}.log", end, args.grace))
                continue
            time.sleep(min(2.0, max(0.1, min(b.wake() for b in active))) if active else 0.1)
            for b in list(active):
                rc = b.poll()
                count(b.run, runs_dir / f"{b.run}.sqlite", todo, done, total, t0)
                if rc is None:
                    continue
                active.remove(b)
                if b.cut:
                    console.print(f"deadline: stopped {b.run} at {done[b.run]}/{len(todo[b.run])}")
                    stopping = True
                elif rc != 0:
                    failed.append(b.run)
                    tail = b.log.read_text(errors="replace").strip().splitlines()[-8:]
                    console.print(f"[red]{b.run}: bench exited with status {rc}[/]; the end of {shown(b.log)}:\n"
                                  + "\n".join(tail), highlight=False)
    except KeyboardInterrupt:
        for b in active:
            b.interrupt()
        raise
    table = Table("run", "level", "staged", "with a verdict", title=f"stores in {shown(runs_dir)}",
                  title_justify="left")
    for run in runs:
        table.add_row(run, ",".join(str(lv) for lv in sorted({lv for lv, _ in todo[run]})), str(len(todo[run])),
                      str(done[run]))
    table.add_row("all", "", str(total), str(sum(done.values())))
    console.print(table)
    left = total - sum(done.values())
    console.print(f"{left} kernel(s) to go: run again to resume" if left else "every staged kernel has a verdict")
    return 1 if failed else 0


def group_of(runs: list[str], left: dict[str, int], i: int, n: int) -> list[str]:
    """The runs of group `i` of `n` (1-based): the runs with kernels left, largest first, each to the
    group with the fewest kernels left so far; groups of one call (same stores) never overlap, so
    `n` of these `run`s may go at once (they share the GPU lock through the cache directory)."""
    load = [0] * n
    mine: set[str] = set()
    for run in sorted((r for r in runs if left[r] > 0), key=lambda r: (-left[r], runs.index(r))):
        k = load.index(min(load))
        load[k] += left[run]
        if k == i - 1:
            mine.add(run)
    return [r for r in runs if r in mine]


def _group(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N with 1 <= I <= N, e.g. 1/2")
    return int(m.group(1)), int(m.group(2))


def count(run: str, db: Path, todo: dict, done: dict, total: int, t0: float) -> None:
    """Refresh `done[run]` from its store; print a line when it moved."""
    try:
        n = stored(db, run, todo[run])
    except (sqlite3.Error, UsageError):  # a store that bench is creating as we look: the next look will do
        return
    if n != done[run]:
        done[run] = n
        console.print(f"[{time.monotonic() - t0:4.0f} s] {run}: {n}/{len(todo[run])} stored; all runs "
                      f"{sum(done.values())}/{total}", highlight=False)


class Bench:
    """One `cuda-agent bench` in a session of its own, appending its output to `log`: SIGTERM (bench's
    Ctrl-C: it drops what is queued and stores what is running) `grace` seconds before `end`, its whole
    process group killed at `end`. `poll()` returns the exit status once it has exited, else None;
    `cut`: stopped by the deadline."""

    def __init__(self, run: str, cmd: list[str], log: Path, end: float | None, grace: float) -> None:
        self.run, self.log, self.end, self.grace = run, log, end, grace
        self.cut = False
        with log.open("ab") as fh:
            fh.write(f"\n$ {shlex.join(cmd)}\n".encode())
            fh.flush()
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None or self.end is None:
            return rc
        now = time.monotonic()
        if not self.cut and now >= self.end - self.grace:
            self.proc.send_signal(signal.SIGTERM)  # SIGINT may be ignored in a background job
            self.cut = True
        if now >= self.end:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the evaluations bench was still waiting for, too
            return self.proc.wait()
        return None

    def wake(self) -> float:
        """Seconds until this bench's next deadline step (or 10)."""
        if self.end is None:
            return 10.0
        return (self.end - self.grace if not self.cut else self.end) - time.monotonic()

    def interrupt(self) -> None:
        """An interrupt of this script (Ctrl-C, SIGTERM), passed on the same way."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=self.grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# -- report ---------------------------------------------------------------------------------------

def ours(record) -> dict[str, Any]:
    """The fields of our verdict kept in rows.jsonl."""
    res = record.result
    first = res.failures[0] if res.failures else None
    return {"correct": res.correct, "reward": res.reward, "compiled": res.compiled,
            "code": first.code.value if first else None if res.correct else "not_correct",  # bench's label
            "kind": first.kind.value if first else None,
            "message": clip(first.message) if first else None, "codes": [r.code.value for r in res.reasons],
            "speedup_eager": res.speedup_eager, "speedup_compile": res.speedup_compile, "seeds": res.seeds,
            "device": res.device.get("name"), "version": record.version, "evaluated_at": record.evaluated_at}


def clip(text: str, n: int = 4000) -> str:
    """Long messages (build logs) as their head and tail: rows.jsonl stays small; the store keeps all."""
    return text if len(text) <= n else f"{text[:n // 2]}\n[... {len(text) - n} characters ...]\n{text[-n // 2:]}"


def joined(rows: list[dict[str, Any]], runs_dir: Path) -> tuple[list[dict[str, Any]], dict[str, dict]]:
    """The selection's rows, each with `ours` (None where no verdict yet); and per run, its store's
    parameters (device, policy)."""
    found: dict[tuple[str, int, int], dict[str, Any]] = {}
    params: dict[str, dict] = {}
    for run in run_order(rows):
        db = runs_dir / f"{run}.sqlite"
        if not db.is_file():
            continue
        with Store(db) as store:
            p = store.run_params(run)
            if p is None:
                continue
            params[run] = p
            for rec in store.records(run):
                m = KB_RUN_FILE.match(Path(rec.candidate).name)
                if m and int(m.group(3)) == 0:
                    found[(run, int(m.group(1)), int(m.group(2)))] = ours(rec)
    return [{**r, "ours": found.get((r["run"], r["level"], r["problem"]))} for r in rows], params


def cell(text: Any, n: int | None = None) -> str:
    s = " ".join(str(text if text is not None else "").split())
    if n is not None and len(s) > n:
        s = s[:n - 1] + "…"
    return s.replace("|", "\\|") or "-"


def gist(message: str | None) -> str | None:
    """A failure message for the table: a traceback's header and frames are no help in ~200
    characters, so it is the text before the traceback and its last line (the exception)."""
    if not message or "Traceback (most recent call last)" not in message:
        return message
    head, _, tail = message.partition("Traceback (most recent call last)")
    last = next((ln for ln in reversed(tail.strip().splitlines()) if ln.strip()), "")
    return f"{head.strip()} [traceback] {last.strip()}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def read_classification(path: Path) -> dict[str, str]:
    """{file: classification} from the hand-edited table: the first cell names the file, the last
    holds the classification."""
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if line.lstrip().startswith("|") and len(cells) >= 2 and cells[0].startswith("runs/"):
                out[cells[0]] = cells[-1]
    return out


def write_classification(path: Path, disagreements: list[dict[str, Any]], known: dict[str, str]) -> int:
    """A template when there is none; else the disagreements it lacks appended as empty rows, when the
    file ends with its table (otherwise left as it is). Returns how many it still lacks."""
    rows = [f"| `{r['file']}` | {direction(r)} | {r['ours']['code'] or 'correct'} |  |"
            for r in disagreements if r["file"] not in known]
    if not path.is_file():
        path.write_text("# Corpus disagreements: classification (hand-edited)\n\n"
                        "`corpus.py report` merges the last column into its table of disagreements, keyed by "
                        "the file; it adds new disagreements at the end and never changes a row. Say why the "
                        "verdicts differ: a counter-example input, the rule the kernel breaks, or a bug of ours.\n\n"
                        "| file | direction | our code | classification |\n| --- | --- | --- | --- |\n"
                        + "".join(r + "\n" for r in rows))
        return 0
    text = path.read_text()
    if rows and text.rstrip().splitlines()[-1].lstrip().startswith("|"):
        path.write_text(text.rstrip("\n") + "\n" + "".join(r + "\n" for r in rows))
        return 0
    return len(rows)


def direction(r: dict[str, Any]) -> str:
    return "KB correct, ours not" if kb_correct(r) else "ours correct, KB not"


def agreement(rows: list[dict[str, Any]]) -> dict[str, int]:
    c = Counter((kb_correct(r), r["ours"]["correct"]) for r in rows if r["ours"])
    return {"kb_ok_ours_ok": c[True, True], "kb_ok_ours_no": c[True, False], "kb_no_ours_ok": c[False, True],
            "kb_no_ours_no": c[False, False]}


def cmd_report(args: argparse.Namespace) -> int:
    selection = read_jsonl(at_root(args.selection), "selection", "run `select` first (or pass --selection)")
    runs_dir = at_root(args.runs_dir)
    rows, params = joined(selection, runs_dir)
    have = [r for r in rows if r["ours"]]
    if not have:
        stores = sorted(p.name for p in runs_dir.glob("*.sqlite")) if runs_dir.is_dir() else []
        raise Stop(f"{shown(runs_dir)}: no verdict of ours for any selected kernel "
                   f"({'stores: ' + ', '.join(stores) if stores else 'no run store there'}); run `corpus.py run`, "
                   "or `corpus.py restore --from PATH` with the stores a device call returned")
    out = at_root(args.dir) if args.dir else ROOT / "docs" / "measured" / f"{args.date}-corpus"
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "rows.jsonl", rows)
    kb_ok = [r for r in have if kb_correct(r)]
    rejected = [r for r in kb_ok if not r["ours"]["correct"]]
    by_policy = [r for r in rejected if r["ours"]["kind"] == "policy"]
    disagree = [r for r in have if kb_correct(r) != r["ours"]["correct"]]
    disagree.sort(key=lambda r: (not kb_correct(r), run_order(selection).index(r["run"]), r["problem"]))
    classification_path = at_root(args.classification) if args.classification else out / "classification.md"
    known = read_classification(classification_path)
    lacking = write_classification(classification_path, disagree, known)

    setups = sorted({f"{p['device']}, policy {p['policy']}" for p in params.values()})
    versions = sorted({r["ours"]["version"] for r in have})
    n_kb_ok = sum(kb_correct(r) is True for r in selection)
    lines = [f"# Our verdicts against KernelBench's: {args.date}", "",
             f"- corpus: `kernelbench-a100-runs` (KernelBench's verdicts: {selection[0]['kernelbench']['hardware']}); "
             f"selection: `{shown(at_root(args.selection))}` ({len(selection)} kernels: {n_kb_ok} KernelBench-correct, "
             f"{len(selection) - n_kb_ok} incorrect)",
             f"- ours: `cuda-agent bench` stores in `{shown(runs_dir)}`; {'; '.join(setups)}; evaluator "
             f"{', '.join(versions)}; device {', '.join(sorted({str(r['ours']['device']) for r in have if r['ours']['device']}))}",
             f"- **{len(have)} of {len(selection)} selected kernels have a verdict of ours**"
             + (" (a partial run: the tables cover those only)" if len(have) < len(selection) else ""),
             "- tasks without a selected kernel (bench's `no_solution`) are not part of the comparison"]
    if any(p["device"] != "cuda" for p in params.values()):
        lines.append("- **not a comparison: some stores were run on the CPU backend**, where these CUDA kernels "
                     "cannot build (a smoke test of the flow)")
    lines += ["",
             "## Agreement", "",
             "| KernelBench \\ ours | correct | not correct | no verdict yet |", "| --- | --- | --- | --- |"]
    for label, kb in (("correct", True), ("not correct", False)):
        mine = [r for r in rows if kb_correct(r) is kb]
        lines.append(f"| {label} | {sum(bool(r['ours'] and r['ours']['correct']) for r in mine)} | "
                     f"{sum(bool(r['ours'] and not r['ours']['correct']) for r in mine)} | "
                     f"{sum(r['ours'] is None for r in mine)} |")
    a = agreement(have)
    lines += ["", f"Agreement: {_pct(a['kb_ok_ours_ok'] + a['kb_no_ours_no'], len(have))} of the kernels with both "
              "verdicts.", "", "### Per corpus run", "",
              "| run | level | selected | with our verdict | KB ✓ ours ✓ | KB ✓ ours ✗ | KB ✗ ours ✓ | KB ✗ ours ✗ "
              "| agree |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in run_order(selection):
        mine = [r for r in rows if r["run"] == run]
        done = [r for r in mine if r["ours"]]
        a = agreement(done)
        lines.append(f"| {run} | {mine[0]['level']} | {len(mine)} | {len(done)} | {a['kb_ok_ours_ok']} | "
                     f"{a['kb_ok_ours_no']} | {a['kb_no_ours_ok']} | {a['kb_no_ours_no']} | "
                     f"{_pct(a['kb_ok_ours_ok'] + a['kb_no_ours_no'], len(done))} |")
    share = len(by_policy) / len(kb_ok) if kb_ok else 0.0
    infra = [r for r in have if r["ours"]["kind"] == "infra"]
    if infra:
        lines += ["", f"{len(infra)} verdict(s) failed for an infra reason (the task, the machine or the evaluator, "
                  "not the kernel): " + ", ".join(f"{r['run']}/{r['problem']} `{r['ours']['code']}`" for r in infra)
                  + "; they count as not correct here: evaluate them again (bench --rescore) before reading too much "
                  "into them."]
    lines += ["", "## KernelBench-correct kernels we reject", "",
              f"{len(rejected)} of {len(kb_ok)} KernelBench-correct kernels with a verdict of ours. "
              f"**Rejected by a rule (kind `policy`): {len(by_policy)} = {100 * share:.1f}%** of them "
              f"(target at most {100 * POLICY_TARGET:.0f}%: {'met' if share <= POLICY_TARGET else 'NOT met'})"
              + (f"; {len(by_policy)} of all {n_kb_ok} selected KernelBench-correct kernels = "
                 f"{_pct(len(by_policy), n_kb_ok)}" if len(kb_ok) < n_kb_ok else "") + ".", "",
              "| our first failure | kind | kernels |", "| --- | --- | --- |"]
    for (code, kind), n in Counter((r["ours"]["code"], r["ours"]["kind"]) for r in rejected).most_common():
        lines.append(f"| {code} | {kind or '-'} | {n} |")
    lines += ["", "| kind | kernels | share of KernelBench-correct |", "| --- | --- | --- |"]
    for kind, n in Counter(r["ours"]["kind"] for r in rejected).most_common():
        lines.append(f"| {kind or '-'} | {n} | {_pct(n, len(kb_ok))} |")
    lines += ["", f"## Disagreements ({len(disagree)})", "",
              f"Both directions. `classification` comes from `{shown(classification_path)}` (hand-edited, keyed by "
              "file; re-generating this report keeps it)"
              + (f"; {lacking} disagreement(s) are not in it yet: add them by hand" if lacking else "") + ".", "",
              "| direction | run | level | problem | file | KernelBench | our first failure | speedup (eager / compile) "
              "| classification |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in disagree:
        kb, o = r["kernelbench"], r["ours"]
        kb_text = ("correct" if kb["correct"] else "compiled, incorrect" if kb["compiled"] else "not compiled") \
            + (f": {kb['note']}" if kb["note"] else "")
        our_text = f"`{o['code']}`: {cell(gist(o['message']), 200)}" if o["code"] else "-"
        speed = f"{_x(o['speedup_eager'])} / {_x(o['speedup_compile'])}" if o["correct"] else "-"
        lines.append(f"| {direction(r)} | {r['run']} | {r['level']} | {r['problem']} | `{r['file']}` | "
                     f"{cell(kb_text, 120)} | {our_text} | {speed} | {cell(known.get(r['file']))} |")
    lines += ["", "Every joined row (KernelBench's verdict and ours: correct, reward, compiled, first failure, "
              "reason codes, speedups, seeds) is in `rows.jsonl` beside this report."]
    (out / "report.md").write_text("\n".join(lines) + "\n")

    console.print(f"{len(have)} of {len(selection)} selected kernels have a verdict of ours")
    table = Table("KernelBench \\ ours", "correct", "not correct")
    a = agreement(have)
    table.add_row("correct", str(a["kb_ok_ours_ok"]), str(a["kb_ok_ours_no"]))
    table.add_row("not correct", str(a["kb_no_ours_ok"]), str(a["kb_no_ours_no"]))
    console.print(table)
    console.print(f"KernelBench-correct rejected by a rule: {len(by_policy)}/{len(kb_ok)} = {100 * share:.1f}% "
                  f"(target <= {100 * POLICY_TARGET:.0f}%); disagreements: {len(disagree)}; first failures of the "
                  "KB-correct we reject: " + (", ".join(f"{k} {v}" for k, v in
                                                    Counter(r["ours"]["code"] for r in rejected).most_common()) or "-"),
                  highlight=False)
    console.print(f"report: {shown(out / 'report.md')}, rows: {shown(out / 'rows.jsonl')}")
    return 0


# -- restore --------------------------------------------------------------------------------------

def cmd_restore(args: argparse.Namespace) -> int:
    src, runs_dir = at_root(Path(args.source)), at_root(args.runs_dir)
    with tempfile.TemporaryDirectory() as tmp:
        archives = [src] if src.is_file() else sorted(src.rglob("*.tar.gz")) if src.is_dir() else []
        loose = sorted(src.rglob("*.sqlite")) if src.is_dir() else []
        if not archives and not loose:
            raise Stop(f"{src}: no .tar.gz or .sqlite files here; pass the files a device call returned "
                       "(its corpus-runs.tar.gz or the folder holding it)")
        found: list[Path] = list(loose)
        for archive in archives:
            try:
                with tarfile.open(archive) as tar:
                    for m in tar.getmembers():
                        name = Path(m.name).name
                        if m.isfile() and Path(m.name).parent.name == "memory" and name.endswith(".json"):
                            memory_dir = runs_dir.parent / "memory"  # the tasks' memory needs, as measured
                            memory_dir.mkdir(parents=True, exist_ok=True)
                            with tar.extractfile(m) as f, (memory_dir / name).open("wb") as g:
                                shutil.copyfileobj(f, g)
                        elif m.isfile() and (name.endswith(".sqlite") or name.endswith(".log")):
                            target = Path(tmp) / name
                            with tar.extractfile(m) as f, target.open("wb") as g:
                                shutil.copyfileobj(f, g)
                            found.append(target)
            except tarfile.TarError:
                raise Stop(f"{archive}: not a readable tar.gz; fetch it again") from None
        runs_dir.mkdir(parents=True, exist_ok=True)
        table = Table("store", "verdicts here", "verdicts returned", "taken", title=f"into {shown(runs_dir)}",
                      title_justify="left")
        taken = set()
        for path in [p for p in found if p.suffix == ".sqlite"]:
            target = runs_dir / path.name
            new, old = verdicts(path), verdicts(target) if target.is_file() else 0
            if new >= old or args.force:
                shutil.copyfile(path, target)
                taken.add(path.stem)
            table.add_row(path.name, str(old), str(new),
                          "yes" if path.stem in taken else "no (fewer; --force takes it)")
        for path in [p for p in found if p.suffix == ".log" and p.stem in taken]:  # a log goes with its store
            shutil.copyfile(path, runs_dir / path.name)
        console.print(table)
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    runs_dir, memory, to = at_root(args.runs_dir), at_root(args.memory), at_root(args.to)
    stores = sorted(runs_dir.glob("*.sqlite")) if runs_dir.is_dir() else []
    if not stores:
        raise Stop(f"{shown(runs_dir)}: no stores (RUN.sqlite) to pack; `run` makes them")
    to.parent.mkdir(parents=True, exist_ok=True)
    part = to.with_name(to.name + ".part")
    with tempfile.TemporaryDirectory() as tmp:
        copies = Path(tmp) / "runs"
        copies.mkdir()
        for db in stores:
            src, dst = sqlite3.connect(db), sqlite3.connect(copies / db.name)
            try:
                src.backup(dst)  # a consistent copy, even while bench commits verdicts
            finally:
                src.close()
                dst.close()
        for log in sorted(runs_dir.glob("*.log")):
            shutil.copyfile(log, copies / log.name)
        n = sum(verdicts(copies / db.name) for db in stores)
        with tarfile.open(part, "w:gz") as tar:
            tar.add(copies, arcname="runs")
            if memory.is_dir():
                tar.add(memory, arcname="memory")
    os.replace(part, to)
    console.print(f"packed {len(stores)} store(s), {n} verdicts, into {shown(to)}", highlight=False)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Drop stored verdicts that a neighbour may have caused, so the next `run` evaluates them again."""
    runs_dir = at_root(args.runs_dir)
    codes = set(args.codes.split(","))
    dropped = []
    for db in sorted(runs_dir.glob("*.sqlite")):
        verdicts(db)  # a store of ours, or a clear error
        con = sqlite3.connect(db)
        with con:
            for run, task, sample, result in con.execute("SELECT run, task, sample, result FROM results").fetchall():
                reasons = json.loads(result).get("reasons") or []
                hit = [r["code"] for r in reasons if r.get("code") in codes or (args.infra and r.get("kind") == "infra")]
                if hit and (not args.where or any(w in f"{run}/{task}" for w in args.where)):
                    con.execute("DELETE FROM results WHERE run = ? AND task = ? AND sample = ?", (run, task, sample))
                    dropped.append((run, task, hit[0]))
        con.close()
    table = Table("run", "task", "code", title=f"{len(dropped)} verdict(s) dropped from {shown(runs_dir)}",
                  title_justify="left")
    for row in dropped:
        table.add_row(*row)
    console.print(table)
    return 0


def verdicts(db: Path) -> int:
    try:
        with Store(db) as store:
            return sum(n for _, _, n in store.runs())
    except (UsageError, sqlite3.Error):
        raise Stop(f"{db}: not a cuda-agent run store; restore what a device call returned, or remove the "
                   "file") from None


# -- command line ---------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="see the module docstring for the "
                                "whole flow, and benchmarks/device_corpus.sh for the GPU machine")
    sub = p.add_subparsers(dest="command", required=True)

    q = sub.add_parser("select", help="choose the kernels (all KernelBench-correct + a sample of its incorrect)",
                       epilog="example: python benchmarks/corpus.py select --incorrect 120 --seed 0")
    q.add_argument("--corpus", type=Path, default=CORPUS,
                   help=f"the kernelbench-a100-runs folder (default: {CORPUS}, from the repository root)")
    q.add_argument("--incorrect", type=int, default=120,
                   help="KernelBench-incorrect kernels to sample, at least 100 (default 120)")
    q.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    q.add_argument("--out", type=Path, default=SELECTION,
                   help=f"the selection, JSONL, committed (default: {SELECTION})")
    q.set_defaults(func=cmd_select)

    q = sub.add_parser("stage", help="copy the tasks and the selected kernels into a git-ignored folder",
                       epilog="example: python benchmarks/corpus.py stage --limit 2 "
                       "--runs gemini_level1_run   (a smoke test)")
    q.add_argument("--corpus", type=Path, default=CORPUS,
                   help=f"the kernelbench-a100-runs folder (default: {CORPUS}, from the repository root)")
    q.add_argument("--selection", type=Path, default=SELECTION, help=f"the output of `select` (default: {SELECTION})")
    q.add_argument("--dest", type=Path, default=STAGED,
                   help=f"the staging folder, git-ignored; its runs/ is kept (default: {STAGED})")
    q.add_argument("--runs", default=None, help="only these corpus runs, comma-separated")
    q.add_argument("--limit", type=int, default=None, help="at most this many kernels per run (smoke tests)")
    q.set_defaults(func=cmd_stage)

    q = sub.add_parser("run", help="`cuda-agent bench` per corpus run into resumable stores",
                       epilog="example: python benchmarks/corpus.py run --device cuda --jobs 8 "
                       "--deadline 540 --cli 'python3 -m cuda_agent'   (arguments after -- go to bench as they are)")
    q.add_argument("--staged", type=Path, default=STAGED, help=f"the folder `stage` filled (default: {STAGED})")
    q.add_argument("--runs-dir", type=Path, default=None, help="the stores, RUN.sqlite (default: STAGED/runs)")
    q.add_argument("--runs", default=None, help="only these corpus runs, comma-separated")
    q.add_argument("--group", type=_group, default=None, metavar="I/N",
                   help="only group I of N of the runs with kernels left, balanced by kernels left; N `run`s "
                   "with --group 1/N .. N/N may go at once (device_corpus.sh: CONCURRENT)")
    q.add_argument("--device", choices=DEVICES, default="cuda", help="bench --device (default cuda)")
    q.add_argument("--policy", choices=POLICIES, default="kernelbench",
                   help="bench --policy (default kernelbench: KernelBench's rules, every cheating check on)")
    q.add_argument("--jobs", type=int, default=None, help="bench --jobs (default: bench's own)")
    q.add_argument("--cache-dir", type=Path, default=None, help="bench --cache-dir (default: $CUDA_AGENT_CACHE)")
    q.add_argument("--timeout", type=float, default=300.0,
                   help="bench --timeout: seconds per evaluation after the build (default 300)")
    q.add_argument("--deadline", type=float, default=None, help="return within this many seconds (default: no limit)")
    q.add_argument("--grace", type=float, default=30.0,
                   help="seconds before the deadline that bench is stopped (SIGTERM; default 30)")
    q.add_argument("--min-left", type=float, default=60.0,
                   help="start no bench with fewer seconds than this before the stop (default 60)")
    q.add_argument("--cli", default="cuda-agent",
                   help="how to call cuda-agent (default cuda-agent; where the package is not installed: "
                   "'python3 -m cuda_agent' with PYTHONPATH=src)")
    q.set_defaults(func=cmd_run)

    q = sub.add_parser("report", help="join the selection with the stores: Markdown report and rows.jsonl",
                       epilog="example: python benchmarks/corpus.py report --date 2025-01-31")
    q.add_argument("--selection", type=Path, default=SELECTION, help=f"the output of `select` (default: {SELECTION})")
    q.add_argument("--runs-dir", type=Path, default=STAGED / "runs",
                   help=f"the stores, RUN.sqlite (default: {STAGED / 'runs'})")
    q.add_argument("--date", default=datetime.date.today().isoformat(), help="the report's date (default: today)")
    q.add_argument("--dir", type=Path, default=None, help="the report's folder (default: docs/measured/DATE-corpus)")
    q.add_argument("--classification", type=Path, default=None,
                   help="the hand-edited classification table (default: DIR/classification.md)")
    q.set_defaults(func=cmd_report)

    q = sub.add_parser("forget", help="drop stored verdicts a neighbour may have caused (run evaluates them again)",
                       epilog="example: python benchmarks/corpus.py forget --codes out_of_memory --infra")
    q.add_argument("--codes", default="out_of_memory", help="reason codes, comma-separated (default out_of_memory)")
    q.add_argument("--infra", action="store_true", help="also every verdict with a reason of kind infra")
    q.add_argument("--where", action="append", default=[], metavar="RUN/TASK",
                   help="only verdicts whose RUN/TASK contains this (repeatable; e.g. gemini_level3_run/level3/23_), "
                        "to evaluate again kernels whose verdict a fix changes")
    q.add_argument("--runs-dir", type=Path, default=STAGED / "runs",
                   help=f"the stores, RUN.sqlite (default: {STAGED / 'runs'})")
    q.set_defaults(func=cmd_forget)

    q = sub.add_parser("pack", help="the stores, logs and memory needs into one tar.gz (what `restore` reads)",
                       epilog="example: python benchmarks/corpus.py pack --to /tmp/out/corpus-runs.tar.gz "
                       "--memory .cache/corpus/memory")
    q.add_argument("--to", type=Path, required=True, help="the archive to write (replaced whole)")
    q.add_argument("--runs-dir", type=Path, default=STAGED / "runs",
                   help=f"the stores, RUN.sqlite, and bench's logs (default: {STAGED / 'runs'})")
    q.add_argument("--memory", type=Path, default=STAGED / "memory",
                   help=f"the tasks' memory needs, *.json (default: {STAGED / 'memory'}; on the GPU machine "
                   "the cache's memory/)")
    q.set_defaults(func=cmd_pack)

    q = sub.add_parser("restore", help="put the stores a device call returned into .corpus/runs",
                       epilog="example: python benchmarks/corpus.py restore --from FILES_AT")
    q.add_argument("--from", dest="source", required=True,
                   help="corpus-runs.tar.gz, or a folder holding it or *.sqlite")
    q.add_argument("--runs-dir", type=Path, default=STAGED / "runs",
                   help=f"where the stores go (default: {STAGED / 'runs'})")
    q.add_argument("--force", action="store_true", help="also take a store with fewer verdicts than the one here")
    q.set_defaults(func=cmd_restore)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = build_parser().parse_args(argv)
    if extra and args.command != "run":
        build_parser().error(f"arguments after -- ({shlex.join(extra)}) are for `run` only")
    args.bench_args = extra
    signal.signal(signal.SIGTERM, _terminate)  # `timeout` and `kill` as Ctrl-C: bench is stopped cleanly
    try:
        return args.func(args)
    except (Stop, UsageError) as exc:
        print(f"corpus.py {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"corpus.py {args.command}: interrupted; what bench stored stays (run again to resume)", file=sys.stderr)
        return 130


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
