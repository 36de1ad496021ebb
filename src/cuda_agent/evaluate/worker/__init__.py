"""The worker processes' side of an evaluation: the judge and the runners.

    python -m cuda_agent.evaluate.worker judge|candidate|eager|compile|spare     (serve.py)

Each serves commands from the harness (process.py) over a private socket (`channel.Channel`):
- the *judge* (judge.py) never loads candidate code; it owns the task, the reference, the inputs and
  the comparison;
- a *runner* (runner.py) loads a `model_new.py` and runs it: the candidate's, or the reference
  wrapped as a candidate for the eager and torch.compile baselines;
- common.py holds what both use: the one timed call, failures and their reason codes; stress.py the
  judge's inputs beyond the task's distribution, work.py its count of the reference's work.

Importing this package imports nothing heavy; torch is imported by the process that serves.
"""
