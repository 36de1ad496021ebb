"""Run the adversarial suite (tests/adversarial) outside pytest, evaluations in parallel, and print
one line per (case, profile, device) and a summary: how many verdicts matched, and the wall time.

    python benchmarks/adversarial.py [--device cpu|cuda|all] [--jobs 8] [--cache-dir DIR] [--only SUBSTR]
                                     [--evaluator | --service] [--shapes N]

Parallel evaluations share the build cache, so each distinct extension is compiled once; they also
share the GPU, which is fine for verdicts (the suite's tests run them one at a time). With
`--evaluator`, the evaluations go through an `Evaluator` per device (warm workers forked from its
zygotes, the device lock), as the agent, training and the benchmark run them, instead of one
`evaluate` each. With `--service`, through a warm evaluation service per device (`cuda-agent serve`,
in a thread of this process, each request over its socket): the verdicts must be the same. Exit
status 1 when any verdict differs from the case's expectation.

With `--shapes N`, every case is evaluated with N shape trials (EvalConfig.shapes) on top of its own
config, and each line also says what they found (`gen=true|false|null`): an honest case must not
come out `false` (a kernel failing at sizes its task allows), and a case whose own config asks for
shape trials keeps its expected verdict. Cases whose config sets `shapes` run with theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import test_adversarial as adv  # noqa: E402  (the suite's case parser and runner)
from cuda_agent.evaluate.service import ServiceClient, running  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "cuda-agent-adv-cache")
    ap.add_argument("--only", default="", help="run only cases whose id contains this")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--evaluator", action="store_true",
                     help="evaluate through an Evaluator per device (pooled, forked workers)")
    how.add_argument("--service", action="store_true",
                     help="evaluate through a warm evaluation service per device (its socket, its pool)")
    ap.add_argument("--shapes", type=int, default=0, metavar="N",
                    help="also run N shape trials in every case; an honest case must not fail them")
    args = ap.parse_args()
    devices = adv.DEVICES if args.device == "all" else (args.device,)
    jobs = [(c, p, code, d) for c in adv.CASES if args.only in c.id for p, code in c.expects
            for d in c.devices if d in devices]
    work = Path(tempfile.mkdtemp(prefix="adv-bench-"))
    t0 = time.monotonic()

    def one(job):
        case, profile, code, device = job
        s = time.monotonic()
        try:
            extra = {"shapes": args.shapes} if args.shapes and "shapes" not in dict(case.config) else {}
            res = adv._run(case, profile, device, args.cache_dir, work / f"{case.id}-{profile}-{device}",
                           evaluators.get(device), **extra)
        except Exception as exc:  # a harness bug: report it as such
            return job, None, f"EXCEPTION {exc!r}", time.monotonic() - s, None
        got = adv._codes(res)
        if code == adv.PASS:
            ok = res.correct and res.reward >= 1 and not got
        else:
            ok = res.reward == -1 and bool(set(code.split("|")) & set(got))
        said = ",".join(got) or f"pass (reward {res.reward})"
        if res.generalization is not None:
            gen = res.generalization["generalizes"]
            said += f" gen={'null' if gen is None else str(gen).lower()}"
            ok = ok and not (case.honest and gen is False)  # an honest kernel fails no size its task takes
        return job, ok, said, time.monotonic() - s, res

    bad = 0
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(args.jobs) as pool:
        evaluators = {}
        for d in devices if args.evaluator or args.service else ():
            cfg = adv.EvalConfig(device=d, cache_dir=args.cache_dir)
            if args.service:
                sock = Path(tempfile.mkdtemp(prefix="adv-svc-")) / "s.sock"
                stack.enter_context(running(cfg, sock, jobs=args.jobs))
                evaluators[d] = stack.enter_context(ServiceClient(sock))
            else:
                evaluators[d] = stack.enter_context(adv.Evaluator(cfg, jobs=args.jobs))
        for fut in as_completed([pool.submit(one, j) for j in jobs]):
            (case, profile, code, device), ok, got, secs, res = fut.result()
            bad += not ok
            mark = "ok  " if ok else "FAIL"
            print(f"{mark} {case.id:38s} {profile:11s} {device:4s} want {code:34s} got {got[:60]:60s} "
                  f"{secs:6.1f}s", flush=True)
            if not ok and res is not None:  # what the verdict rests on, to tell a hole from a flake
                for r in res.reasons:
                    print(f"       {r.code.value}: {' | '.join(r.message.strip().splitlines()[-3:])[:300]}")
                print(f"       phases: {res.phases_s}")
    wall = time.monotonic() - t0
    print(f"\n{len(jobs) - bad}/{len(jobs)} verdicts as expected, {bad} not; wall {wall:.0f} s "
          f"with {args.jobs} parallel evaluations ({', '.join(devices)}"
          f"{', through a service' if args.service else ', through an Evaluator' if evaluators else ''})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
