"""The workspace's fixed commands: compile, verify, profile.

    bash utils/compile.sh           -> main("compile", root, argv)
    python3 -m utils.verification   -> main("verify", root, argv)
    python3 -m utils.profiling      -> main("profile", root, argv)

They read only `model_new.py` and `kernels/` from the workspace (through `load_candidate`), take the
task from the record that `init_workspace` wrote outside the workspace (or from `$CUDA_AGENT_TASK`),
and hand both to the evaluator. Their output is read by an LLM agent: short plain text, the failure's
reason codes and messages, and what to do next. `--json` prints the full result as one JSON object.

Exit status: 0 success (built; correct; correct and timed), 1 the candidate failed, 2 a usage error
(no recorded task, no model_new.py, bad option).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cuda_agent.errors import CudaAgentError
from cuda_agent.text import clip

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COMMANDS = {"compile": "bash utils/compile.sh", "verify": "python3 -m utils.verification",
            "profile": "python3 -m utils.profiling"}
MESSAGE_LIMIT = 4000  # characters of one reason's message shown (the tail: tracebacks end there)
LOG_LIMIT = 6000  # characters of compiler log shown after the summary of its errors
OUTPUT_LIMIT = 2000  # characters of the candidate's own stdout/stderr shown

# What to do next, by reason code: the model reads these.
HINTS = {
    "compile_error": "fix the first error above, then run `bash utils/compile.sh` again",
    "build_timeout": "the build took too long: simplify the sources (fewer template instantiations, "
                     "smaller unrolled loops), then run `bash utils/compile.sh` again",
    "load_error": "importing failed. `undefined symbol` means a function declared in a *_binding.cpp is "
                  "not defined in any kernel file with exactly that signature; `No module named "
                  "'cuda_extension'` means kernels/ has no sources; a Python error is in model_new.py",
    "no_model_new": "model_new.py must define `class ModelNew(nn.Module)`",
    "init_error": "ModelNew(*get_init_inputs()) must work: give ModelNew.__init__ the same arguments as "
                  "Model.__init__ in model.py",
    "state_dict_mismatch": "give ModelNew the same parameters and buffers as Model (names, shapes, "
                           "dtypes), e.g. keep its nn.Linear/nn.Parameter attributes: the reference "
                           "weights are loaded into them",
    "runtime_error": "read the traceback above; check the shapes, dtypes, devices and contiguity your "
                     "binding assumes (TORCH_CHECK in the binding says which)",
    "crash": "the process died (segfault or abort): look for out-of-bounds indexing, sizes passed wrongly "
             "to a launcher, or outputs that were never allocated",
    "illegal_memory_access": "a kernel read or wrote out of bounds: check index arithmetic, the bounds "
                             "check (`if (i < n)`) and the grid size",
    "timeout": "a call hung or was far too slow: look for endless loops, __syncthreads() in divergent "
               "code, or a launch configuration that does far too much work",
    "out_of_memory": "allocate less: no huge temporaries, reuse buffers within one call",
    "structure_mismatch": "return exactly what Model.forward returns (tensor, tuple or list, same length)",
    "shape_mismatch": "return outputs with exactly the shapes Model.forward returns",
    "dtype_mismatch": "return outputs with exactly the dtypes Model.forward returns",
    "not_plain_tensor": "return plain torch.Tensor objects, not subclasses or wrappers",
    "non_finite": "NaN/Inf where the reference has none: uninitialised memory (torch::empty does not "
                  "zero), division by zero or overflow (use a numerically stable formulation)",
    "output_mismatch": "the values differ from model.py's Model: compare your kernel's math with model.py "
                       "op by op; check indexing, strides, reductions, and that every output element is "
                       "written",
    "stress_mismatch": "wrong on inputs beyond get_inputs()'s distribution (scaled up; inputs within "
                       "[-1, 1] pushed to the ends of that range; zeros, signs and integer values kept): do "
                       "not assume inputs are small; use numerically stable forms (e.g. subtract the max "
                       "before exp)",
    "timed_output_mismatch": "outputs of repeated calls were wrong: every call must compute its output "
                             "from its inputs; no caching across calls, no stale buffers",
    "input_modified": "do not write into inputs or weights; write results into tensors allocated with "
                      "torch::empty*",
    "torch_fallback": "ModelNew.forward may only call your extension's ops, allocate with the empty "
                      "family and use views/metadata, and the extension may not call PyTorch/ATen compute "
                      "ops: move that computation into your kernels (see SKILL.md, Rules)",
    "decoy_kernel": "forward never called your extension: call your kernels' ops from ModelNew.forward",
    "weights_modified": "forward changed the model's parameters or buffers: treat weights as read-only; "
                        "derive tensors from them outside forward (and again in a "
                        "register_load_state_dict_post_hook, since weights are loaded after __init__)",
    "hidden_work": "no native threads (std::thread), Python threads or child processes left running: do "
                   "all work inside the call, on the device or with OpenMP, and let it finish",
    "stream_race": "the output was not complete on the caller's stream when forward returned: join every "
                   "side stream back (torch.cuda.current_stream().wait_stream(side), or cudaStreamWaitEvent)",
    "timing_probe": "behave the same on every call: timing a choice once is fine, detecting the timer is not",
    "harness_patch": "do not replace torch's functions, the timer or synchronisation: call your own "
                     "functions instead",
    "reference_access": "do not touch other processes' memory (ptrace, /proc/<pid>/) or the reference: "
                        "compute the output from the inputs",
    "forbidden_io": "no processes that leave their process group (setsid, start_new_session) and no "
                    "signals to other processes",
    "early_exit": "never exit the process: return the output from forward",
    "protocol_violation": "the candidate interfered with the evaluator's process or channel; remove "
                          "whatever touches file descriptors, sockets, signals or the process itself",
    "timing_tampered": "the candidate interfered with the timing; behave the same on every call",
    "reference_error": "the task's own Model failed: not a problem of your code; report it",
    "device_unavailable": "the device is not available here: not a problem of your code; try "
                          "--device cpu or report it",
    "infra_error": "the evaluator or the machine failed: not a problem of your code; run the command "
                   "again, and report it if it persists",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit status 2 with a plain message, as argparse does
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def _parser(command: str) -> argparse.ArgumentParser:
    from cuda_agent.evaluate.config import DEVICES

    what = {"compile": "Build kernels/ into the module cuda_extension and check that it loads.",
            "verify": "Check ModelNew against the task's Model (correctness only).",
            "profile": "Check ModelNew, then time it against eager PyTorch and torch.compile."}[command]
    p = _Parser(prog=COMMANDS[command], description=what)
    p.add_argument("--device", choices=DEVICES, default=None,
                   help="backend (default: the workspace's device, chosen at init-workspace)")
    p.add_argument("--json", action="store_true", help="print the full result as one JSON object")
    if command != "compile":
        p.add_argument("--trials", type=_positive_int, default=None,
                       help="correctness trials with fresh random inputs (default 5)")
    return p


def main(command: str, workspace_dir: str | Path, argv: list[str]) -> int:
    """Run the workspace command `command` ("compile", "verify" or "profile") on `workspace_dir`;
    inside the agent's sandbox (`$CUDA_AGENT_EVAL_SOCKET` set), through the evaluator bridge."""
    if command not in COMMANDS:
        print(f"error: unknown workspace command {command!r}; use one of {', '.join(COMMANDS)}",
              file=sys.stderr)
        return EXIT_USAGE
    if sock := os.environ.get("CUDA_AGENT_EVAL_SOCKET"):
        return forward(sock, command, argv)
    try:
        args = _parser(command).parse_args(argv)
    except SystemExit as exc:  # --help, or a bad option (argparse printed why)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return _run(command, Path(workspace_dir), args)
    except CudaAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _run(command: str, root: Path, args: argparse.Namespace) -> int:
    from cuda_agent.evaluate import EvalConfig, load_candidate
    from cuda_agent.workspace import workspace_task

    task, meta = workspace_task(root)
    device = args.device or meta.get("device") or "auto"
    candidate = load_candidate(root)
    if command == "compile":
        return _compile(candidate, device, args.json)
    cfg = EvalConfig(device=device, timing=command == "profile",
                     **({"trials": args.trials} if args.trials else {}))
    res, where = _evaluate(task, candidate, cfg)
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        print(_report(command, res))
    # last, one short line: the agent reads stdout and stderr together as the tool's output
    print(f"(evaluated {where})", file=sys.stderr)
    if command == "verify":
        return EXIT_OK if res.correct else EXIT_FAILED
    return EXIT_OK if res.correct and res.times_ms.get("candidate") is not None else EXIT_FAILED


def _evaluate(task, candidate, cfg):
    """The verdict, through the warm evaluation service when one runs for this cache and device
    (`$CUDA_AGENT_SERVICE`: auto, start or off), else in this process; and which of the two."""
    from cuda_agent.evaluate import evaluate
    from cuda_agent.evaluate.config import default_service_mode
    from cuda_agent.evaluate.service import connect

    try:
        client, _why = connect(cfg, default_service_mode())
    except ValueError as exc:
        raise CudaAgentError(str(exc)) from None
    if client is None:
        return evaluate(task, candidate, cfg), "in-process"
    with client:
        return client.evaluate(task, candidate, cfg), "through the warm service"


def forward(sock_path: str, command: str, argv: list[str]) -> int:
    """Send the command to the evaluator bridge outside the sandbox (agent/bridge.py); print what it
    printed and return its exit status."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(sock_path)
            s.sendall(json.dumps({"command": command, "argv": list(argv)}).encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := s.recv(1 << 16):
                chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except (OSError, ValueError) as exc:
        print(f"error: cannot reach the evaluator ({exc}); the episode's evaluator bridge is gone", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(reply.get("output", ""))
    sys.stdout.flush()
    return int(reply.get("exit", EXIT_USAGE))


# --- compile ---------------------------------------------------------------------------------------

_PROBE = """\
import importlib.util, json, sys
import torch  # the extension links against torch's libraries
spec = importlib.util.spec_from_file_location("cuda_extension", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps(sorted(n for n in dir(mod) if not n.startswith("_"))))
"""


def _probe(so_path: Path, sup=None, cache_dir: Path | None = None) -> tuple[list[str] | None, str]:
    """Load the built module in a fresh interpreter (in a sandbox where `sup` gives one: loading
    runs the module's static initialisers, candidate code): (its ops, "") or (None, the error)."""
    from cuda_agent.evaluate.isolate import build_spec
    from cuda_agent.sandbox import hand_over, start

    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as cwd:
        argv = [sys.executable, "-c", _PROBE, str(so_path)]
        popen = dict(cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        if sup is not None:
            hand_over(Path(cwd), sup)
        proc = start(build_spec(Path(cwd), cache_dir, uid=sup.bwrap_uid), argv, sup, **popen) if sup is not None else subprocess.Popen(argv, **popen)
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None, "loading the module did not finish within 300 s (a static initialiser hangs?)"
        out = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    if out.returncode == 0:
        try:
            return json.loads(out.stdout.strip().splitlines()[-1]), ""
        except (ValueError, IndexError):
            pass
    error = "\n".join(ln for ln in (out.stderr or out.stdout).strip().splitlines()  # no frames: the
                      if not ln.startswith(("Traceback (most recent", "  ")))  # error line says it
    if (m := re.search(r"undefined symbol: (\S+)", error)) and shutil.which("c++filt"):
        name = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
        if name and name != m.group(1):
            error += f"\n(the undefined symbol is `{name}`)"
    return None, clip(error, MESSAGE_LIMIT, keep="tail") or f"exit status {out.returncode}"


def _compile(candidate, device: str, as_json: bool) -> int:
    from cuda_agent.evaluate.build import build_extension
    from cuda_agent.evaluate.config import EvalConfig
    from cuda_agent.evaluate.device import cuda_arch, resolve_device

    device = resolve_device(device)
    cfg = EvalConfig(device=device)
    sources = candidate.compiled_sources
    if not sources:
        msg = ("nothing to compile: kernels/ holds no .cu, .cpp or .cc file. Write your kernels and their "
               "*_binding.cpp files there (see SKILL.md), then run `bash utils/compile.sh` again.")
        print(json.dumps({"ok": False, "device": device, "sources": [], "message": msg}) if as_json else msg)
        return EXIT_FAILED
    # The same architecture as the evaluator's build, so this build is the one verification reuses.
    from cuda_agent.evaluate.isolate import isolation_support

    sup = isolation_support(cfg)
    built = build_extension(candidate, device, cuda_arch() if device == "cuda" else None, cfg.cache_dir,
                            cfg.build_timeout_s, sup)
    assert built is not None
    ops, load_error = _probe(built.so_path, sup, cfg.cache_dir) if built.ok else (None, "")
    ok = built.ok and ops is not None
    if as_json:
        print(json.dumps({"ok": ok, "device": device, "sources": [f"kernels/{s}" for s in sources],
                          "cached": built.cached, "seconds": round(built.seconds, 3),
                          "timed_out": built.timed_out, "ops": ops, "load_error": load_error or None,
                          "log": built.log}))
        return EXIT_OK if ok else EXIT_FAILED
    files = ", ".join(f"kernels/{s}" for s in sources)
    if not built.ok:
        if built.timed_out:
            print(f"compile FAILED: the build did not finish within {cfg.build_timeout_s:.0f} s ({device}).")
        else:
            print(f"compile FAILED ({device}): {files}")
        print(compiler_summary(built.log))
        print(f"next: {HINTS['build_timeout' if built.timed_out else 'compile_error']}")
        return EXIT_FAILED
    if ops is None:
        print(f"compile FAILED: the sources compiled, but the module cuda_extension does not load ({device}):")
        print(load_error)
        print("next: an `undefined symbol` means a function declared in a *_binding.cpp is not defined in any "
              "kernel file with exactly that signature; fix it, then run `bash utils/compile.sh` again")
        return EXIT_FAILED
    how = "cached: these exact sources were built before" if built.cached else f"{built.seconds:.1f} s"
    print(f"compiled OK ({how}), {device}: {files}")
    print("module cuda_extension ops: " + (", ".join(ops) if ops else
                                           "none (no REGISTER_BINDING in kernels/*_binding.cpp?)"))
    print("next: python3 -m utils.verification")
    return EXIT_OK


_ERROR_LINE = re.compile(r"error|undefined reference|multiple definition|fatal", re.IGNORECASE)
_BUILD_DIR = re.compile(r"[^\s:'\"`]*/builds/(?:[0-9a-f]{32}\.[^/\s]+|incremental/[0-9a-f]{24})/")  # the build folder
_NOISE = re.compile(r"^\[\d+/\d+\] |^FAILED: |^ninja: build stopped|^<frozen runpy>|^build failed: Error building")


def _clean_log(log: str) -> list[str]:
    """The compiler log as the model should see it: paths relative to the workspace (kernels/x.cu:12),
    without build command lines (hundreds of characters of flags each) and build-tool chatter."""
    lines = []
    for ln in _BUILD_DIR.sub("", log).splitlines():
        if _NOISE.match(ln) or (len(ln) > 300 and (" -I" in ln or " -isystem " in ln)):
            continue
        lines.append(ln[:1000])
    return lines


def compiler_summary(log: str) -> str:
    """The compiler's errors first (each with its source excerpt), then the tail of the log."""
    lines = _clean_log(log)
    errors: list[str] = []
    for i, ln in enumerate(lines):
        if len(errors) >= 40:
            break
        if _ERROR_LINE.search(ln) and "warning" not in ln.lower():
            errors.append(ln)
            for nxt in lines[i + 1:i + 4]:  # gcc/nvcc print the offending line and a caret, indented
                if not nxt.startswith((" ", "\t")):
                    break
                errors.append(nxt)
    if not errors:
        return "compiler output:\n" + clip("\n".join(lines), LOG_LIMIT, keep="tail")
    return ("errors:\n" + "\n".join(errors) + "\n\ncompiler output (tail):\n"
            + clip("\n".join(lines), LOG_LIMIT // 2, keep="tail"))


# --- verify / profile ------------------------------------------------------------------------------

def _trial_summary(res) -> str:
    ran = [t for t in res.trials if "skipped" not in t]
    normal = sum(1 for t in ran if not t.get("stress"))
    stress = sum(1 for t in ran if t.get("stress"))
    skipped = len(res.trials) - len(ran)
    text = f"{normal} trial(s) with fresh random inputs and {stress} stress trial(s)"
    if skipped:
        text += f" ({skipped} stress trial(s) skipped: the reference is not finite there)"
    return text


def _tolerance(res) -> str:
    c = res.config
    return f"atol={c.get('atol'):g}, rtol={c.get('rtol'):g}, error norm <= {c.get('norm_tol'):g}"


def _device_name(res) -> str:
    d = res.device or {}
    name = d.get("name") or d.get("gpu") or d.get("type") or "?"
    kind = d.get("type")
    return f"{kind}: {name}" if kind and name != kind else str(name)


def _failure_lines(res) -> list[str]:
    out: list[str] = []
    for r in res.failures:
        out.append(f"[{r.code.value}] " + (compiler_summary(r.message) if r.code.value == "compile_error"
                                            else clip(r.message.strip(), MESSAGE_LIMIT, keep="tail")))
    printed = res.candidate_output or {}
    text = ((printed.get("stdout") or "") + (printed.get("stderr") or "")).strip()
    if text:
        out.append("your code printed (tail):\n" + clip(text, OUTPUT_LIMIT, keep="tail"))
    first = res.failures[0].code.value if res.failures else None
    if first in ("compile_error", "build_timeout"):
        out.append(f"next: {HINTS[first]}")
    elif first:
        out.append(f"next: {HINTS.get(first, 'fix the problem above')}, then run "
                   "`python3 -m utils.verification` again")
    return out


def _notes(res) -> list[str]:
    return [f"note [{r.code.value}]: {clip(r.message.strip(), 600, keep='tail')}" for r in res.reasons
            if not r.is_failure and r.code.value != "timing_skipped"]


def _report(command: str, res) -> str:
    lines: list[str] = []
    if not res.correct:
        stage = "did not build" if not res.compiled else "is not correct"
        lines.append(f"{'verification' if command == 'verify' else 'profiling'}: FAILED, ModelNew {stage} "
                     f"({_device_name(res)})")
        lines += _failure_lines(res)
        if command == "profile":
            lines.append("reward: -1 (not correct; nothing was timed)")
        return "\n".join(lines)
    if command == "verify":
        lines.append(f"verification: PASSED, ModelNew is correct on {_trial_summary(res)} "
                     f"({_device_name(res)}; {_tolerance(res)})")
        lines += _notes(res)
        lines.append("next: python3 -m utils.profiling (timing and reward)")
        return "\n".join(lines)
    lines.append(f"profiling: correct on {_trial_summary(res)} ({_device_name(res)})")
    lines.append("median time per call (ms, IQR in brackets):")
    for key, label in (("eager", "eager PyTorch"), ("compile", "torch.compile"), ("candidate", "ModelNew")):
        st = res.times_ms.get(key)
        lines.append(f"  {label:14s} " + (f"{st.median:10.4f}  [{st.iqr:.4f}], {st.n} calls" if st
                                         else "not measured"))
    se, sc = res.speedup_eager, res.speedup_compile
    lines.append("speedup: " + (f"{se:.3f}x over eager" if se is not None else "eager not measured")
                 + ", " + (f"{sc:.3f}x over torch.compile" if sc is not None else "torch.compile not measured"))
    lines += _notes(res)
    lines.append(f"reward: {res.reward} " + {
        1: "(correct; more than 5% faster than eager, i.e. speedup > 1.05, earns 2)",
        2: "(faster than eager; more than 5% faster than torch.compile too earns 3)",
        3: "(the highest: more than 5% faster than both eager and torch.compile)",
    }.get(res.reward, ""))
    if res.reward < 3:
        lines.append("next: make the kernels faster (fuse ops, better memory access), verify after each change")
    return "\n".join(lines)
