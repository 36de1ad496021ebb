"""Does the race check of the correctness trials (worker.StreamCheck) hold on this GPU? Prints, for
the hold kernel and for forwards that leave work on an unjoined stream or join it back, how often
a race was reported over N tries, with the hold on and off.

    python benchmarks/stream_check.py [--tries 20] [--numel 16384]

What it measures:
- the hold's compile time (NVRTC, once per process) and how long one hold keeps the SMs (events);
- whether a kernel launched on another stream right after the hold waits for it;
- detection of an unjoined side stream (must be every try) and of a joined one (must be none), for
  a small and a large output.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> int:
    import torch

    from cuda_agent.evaluate import worker
    from cuda_agent.evaluate.timing import Timer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    t0 = time.perf_counter()
    check = worker.StreamCheck(dev)
    print(f"hold compiled: {check.hold_fn is not None} in {time.perf_counter() - t0:.2f} s")
    if check.hold_fn is not None:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(check.stream):
            s.record()
            check.hold_fn(check.hold_in, ns=worker.STREAM_HOLD_MS * 1e6 / worker.HOLD_ELEMENTS_PER_THREAD)
            e.record()
        # a small kernel on a third stream, launched right after the hold
        other = torch.cuda.Stream()
        x = torch.randn(1 << 14, device=dev)
        torch.relu(x)  # loaded before it is timed
        torch.cuda.synchronize()
        done = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(check.stream):
            s.record()
            check.hold_fn(check.hold_in, ns=worker.STREAM_HOLD_MS * 1e6 / worker.HOLD_ELEMENTS_PER_THREAD)
            e.record()
        with torch.cuda.stream(other):
            torch.relu(x)
            done.record()
        torch.cuda.synchronize()
        print(f"hold: {s.elapsed_time(e):.2f} ms; a kernel on another stream finished {s.elapsed_time(done):.2f} ms "
              "after the hold began")
    timer = Timer(dev)
    side = torch.cuda.Stream()

    def unjoined(x):
        out = torch.empty_like(x)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.abs(x, out=out)
        return out

    def joined(x):
        out = unjoined(x)
        torch.cuda.current_stream().wait_stream(side)
        return out

    fails = 0
    for numel in (64 * 256, 1 << 24):
        for hold in (True, False):
            fn = check.hold_fn
            if not hold:
                check.hold_fn = None
            for name, forward in (("unjoined", unjoined), ("joined", joined)):
                caught = 0
                for _ in range(args.tries):
                    x = torch.randn(numel, device=dev)  # fresh inputs, as every trial has
                    try:
                        check.call(timer, forward, [x])
                    except worker.Failure as f:
                        assert f.code.value == "stream_race", f.code
                        caught += 1
                want = args.tries if name == "unjoined" else 0
                ok = caught == want or not hold
                fails += not ok
                print(f"numel {numel:>9} hold {'on ' if hold else 'off'} {name:9}: race reported "
                      f"{caught}/{args.tries}{'' if ok else '  <-- WRONG'}")
            check.hold_fn = fn
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
