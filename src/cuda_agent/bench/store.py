"""The run store: one SQLite file holding every run and every verdict with its full EvalResult.

Each verdict is committed as soon as it arrives, so a run that is killed loses at most the
evaluations in flight, and `cuda-agent bench` with the same run name carries on from there. A run
records its task set (ids and levels), so its metrics count tasks that have no solution.

    runs(name, created, params)                       params: JSON (task set, solutions, device, ...)
    results(run, task, sample, level, candidate,      result: the EvalResult as JSON
            candidate_sha, result, evaluated_at, version)
    claimed(run, task, sample, origin, claimed)       what a published dump claims of a solution
                                                      (bench/dumps.py): JSON (correct, speedup, ...)
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import UsageError
from cuda_agent.evaluate.result import EvalResult

# One transaction, so a reader of a store being created sees both tables or none.
SCHEMA = """
BEGIN;
CREATE TABLE IF NOT EXISTS runs (
    name TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    params TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run TEXT NOT NULL REFERENCES runs(name),
    task TEXT NOT NULL,
    sample INTEGER NOT NULL,
    level INTEGER,
    candidate TEXT NOT NULL,
    candidate_sha TEXT NOT NULL,
    result TEXT NOT NULL,
    evaluated_at TEXT NOT NULL,
    version TEXT NOT NULL,
    PRIMARY KEY (run, task, sample)
);
CREATE TABLE IF NOT EXISTS claimed (
    run TEXT NOT NULL REFERENCES runs(name),
    task TEXT NOT NULL,
    sample INTEGER NOT NULL,
    origin TEXT NOT NULL,
    claimed TEXT NOT NULL,
    PRIMARY KEY (run, task, sample)
);
COMMIT;
"""


@dataclass(frozen=True, slots=True)
class Record:
    task: str
    sample: int
    level: int | None
    candidate: str
    candidate_sha: str
    result: EvalResult
    evaluated_at: str
    version: str


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{self.path}: not a cuda-agent run store ({exc}); pass another --db") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs --
    def run_params(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT params FROM runs WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def runs(self) -> list[tuple[str, str, int]]:
        """(name, created, verdicts) of every run, oldest first."""
        return self.db.execute(
            "SELECT r.name, r.created, COUNT(x.task) FROM runs r LEFT JOIN results x ON x.run = r.name "
            "GROUP BY r.name ORDER BY r.created, r.name").fetchall()

    def open_run(self, name: str, params: dict[str, Any]) -> bool:
        """Create the run, or check that an existing one was started with the same parameters.
        Returns True when the run existed (a resume)."""
        old = self.run_params(name)
        if old is None:
            with self.db:
                self.db.execute("INSERT INTO runs VALUES (?, ?, ?)",
                                (name, _now(), json.dumps(params, sort_keys=True)))
            return False
        keys = ("taskset", "solutions", "device", "policy", "tasks")
        changed = [k for k in keys if old.get(k) != params.get(k)]
        if changed:
            raise UsageError(
                f"run {name!r} already exists in {self.path} with another {', '.join(changed)}; to resume "
                "it, pass the same arguments; to start a new one, pass --run NEW_NAME")
        return True

    def require_run(self, name: str) -> dict[str, Any]:
        params = self.run_params(name)
        if params is None:
            known = ", ".join(n for n, _, _ in self.runs()) or "none yet"
            raise UsageError(f"no run named {name!r} in {self.path} (runs: {known}); "
                             "start one with `cuda-agent bench`")
        return params

    # -- verdicts --
    def done(self, run: str) -> set[tuple[str, int]]:
        return {(t, s) for t, s in self.db.execute("SELECT task, sample FROM results WHERE run = ?", (run,))}

    def put(self, run: str, task: str, sample: int, level: int | None, candidate: str, candidate_sha: str,
            result: EvalResult, version: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (run, task, sample, level, candidate, candidate_sha,
                             json.dumps(result.to_json()), _now(), version))

    def put_claimed(self, run: str, rows: list[tuple[str, int, str, dict[str, Any]]]) -> None:
        """What a dump claims of each (task, sample, origin in the dump, figures) of `run`."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO claimed VALUES (?, ?, ?, ?, ?)",
                                [(run, t, s, o, json.dumps(c, sort_keys=True)) for t, s, o, c in rows])

    def claimed(self, run: str) -> dict[tuple[str, int], dict[str, Any]]:
        """{(task, sample): {"origin", **figures}} of `run` (empty where its solutions were not a dump)."""
        return {(t, s): {"origin": o, **json.loads(c)} for t, s, o, c in self.db.execute(
            "SELECT task, sample, origin, claimed FROM claimed WHERE run = ?", (run,))}

    def records(self, run: str) -> Iterator[Record]:
        for row in self.db.execute(
                "SELECT task, sample, level, candidate, candidate_sha, result, evaluated_at, version "
                "FROM results WHERE run = ? ORDER BY level, task, sample", (run,)):
            yield Record(row[0], row[1], row[2], row[3], row[4], EvalResult.from_json(json.loads(row[5])),
                         row[6], row[7])


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
