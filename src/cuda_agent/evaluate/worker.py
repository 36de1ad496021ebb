"""Worker processes of one evaluation: the judge and the candidate's runner.

    python -m cuda_agent.evaluate.worker judge|candidate

Each serves commands from the harness over a private socket (`channel.Channel`, fd given in
`CUDA_AGENT_CHANNEL_FD`); its stdout and stderr are the harness's to read, never the protocol.

- The *judge* never loads candidate code. It owns the task module, the reference model, the inputs
  (generated on the device from seeds the harness chooses), the reference outputs, the comparison and
  the eager / torch.compile baseline timings.
- The *candidate* process loads `model_new.py` and the built extension and runs them. It owns the
  buffers that cross the boundary; the judge opens them (transport.py). Whatever it reports is a claim
  the judge or the harness checks: outputs are compared by the judge, inputs re-read by the judge.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.channel import Channel, ChannelClosed
from cuda_agent.evaluate.result import Code

ILLEGAL_ADDRESS_ERRORS = {700, 716, 717, 718, 719}  # cudaErrorIllegalAddress ... cudaErrorLaunchFailure


class Failure(Exception):
    """A verdict-bearing failure raised inside a worker command."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _trace(exc: BaseException, limit: int = 6000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def classify(exc: BaseException) -> tuple[Code, str]:
    """Reason code for an exception escaping candidate (or task) code."""
    import torch

    if isinstance(exc, Failure):
        return exc.code, exc.message
    if isinstance(exc, torch.OutOfMemoryError):
        return Code.OUT_OF_MEMORY, _trace(exc)
    accel = getattr(torch, "AcceleratorError", None)
    if accel is not None and isinstance(exc, accel):
        if getattr(exc, "error_code", None) in ILLEGAL_ADDRESS_ERRORS:
            return Code.ILLEGAL_MEMORY_ACCESS, _trace(exc)
    return Code.RUNTIME_ERROR, _trace(exc)


def _from_cpp_extension(exc: BaseException) -> bool:
    """True when `exc` was raised while torch.utils.cpp_extension built an inline extension."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(os.path.join("utils", "cpp_extension.py")):
            return True
        tb = tb.tb_next
    return False


def _import_file(name: str, path: Path):
    """Import the module file `path` (source or extension) as `name`, registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _device(name: str):
    import torch

    if name == "cuda":
        if not torch.cuda.is_available():
            raise Failure(Code.DEVICE_UNAVAILABLE,
                          "--device cuda was asked for, but torch sees no CUDA device here "
                          f"(torch {torch.__version__}); use --device cpu")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# --- the judge -------------------------------------------------------------------------------------

class Judge:
    def __init__(self) -> None:
        self.trials: dict[str, dict[str, Any]] = {}
        self.compiled = None

    def cmd_setup(self, task_source: str, origin: str, device: str, init_seed: int,
                  shm_dir: str) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate.device import device_info
        from cuda_agent.evaluate.timing import Timer
        from cuda_agent.evaluate.transport import Importer, describe, inline_tensor

        self.device = _device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.importer = Importer(self.device, Path(shm_dir))
        module = type(sys)("cuda_agent_task")
        module.__file__ = origin
        sys.modules["cuda_agent_task"] = module
        try:
            exec(compile(task_source, origin, "exec"), module.__dict__)
            torch.manual_seed(init_seed)
            init_inputs = module.get_init_inputs()
            self.model = module.Model(*init_inputs).to(self.device).eval()
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the task's Model could not be built:\n{_trace(exc)}")
        self.task = module
        self.timer = Timer(self.device)
        return {
            "device": device_info(self.device.type),
            "init_inputs": describe(list(init_inputs), inline_tensor),
            "state": {k: describe(v) for k, v in self.model.state_dict().items()},
        }

    def cmd_weights(self, state: dict[str, Any]) -> dict[str, Any]:
        ref = self.model.state_dict()
        if not isinstance(state, dict):
            raise Failure(Code.PROTOCOL_VIOLATION, "state_dict spec is not an object")
        missing, extra = sorted(set(ref) - set(state)), sorted(set(state) - set(ref))
        if missing or extra:
            raise Failure(Code.STATE_DICT_MISMATCH,
                          "ModelNew's parameters and buffers must have the same names as Model's, so "
                          f"the reference weights can be loaded strictly; missing: {missing or 'none'}, "
                          f"unexpected: {extra or 'none'}")
        for k, v in ref.items():
            s = state[k]
            if s.get("shape") != list(v.shape) or s.get("dtype") != str(v.dtype).removeprefix("torch."):
                raise Failure(Code.STATE_DICT_MISMATCH,
                              f"{k}: ModelNew has {s.get('dtype')}{s.get('shape')}, Model has "
                              f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}")
        for k, v in ref.items():
            self.importer.open(state[k]).copy_(v)
        self.timer.sync()
        self.importer.close()
        return {}

    def _inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.task.get_inputs())
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def cmd_prepare(self, trial: str, seed: int, stress: int | None = None) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate.transport import describe, tensors_of

        try:
            inputs = self._inputs(seed)
            if stress is not None:
                inputs = [_stress(x, stress) for x in inputs]
            with torch.no_grad():
                ref = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            self.timer.sync()
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the reference Model failed on its inputs:\n{_trace(exc)}")
        if stress is not None and not all(bool(torch.isfinite(t).all()) for t in tensors_of(ref)
                                           if t.is_floating_point()):
            return {"skip": True}
        self.trials[trial] = {"inputs": inputs, "ref": ref}
        return {"skip": False, "spec": describe(inputs)}

    def cmd_fill(self, trial: str, spec: dict[str, Any]) -> dict[str, Any]:
        from cuda_agent.evaluate.transport import build, tensors_of

        t = self.trials[trial]
        aliases = build(spec, self.importer.open)
        mine, theirs = tensors_of(t["inputs"]), tensors_of(aliases)
        if len(mine) != len(theirs) or any(a.shape != b.shape or a.dtype != b.dtype
                                           for a, b in zip(mine, theirs)):
            raise Failure(Code.PROTOCOL_VIOLATION, "the candidate allocated inputs unlike the spec")
        for a, b in zip(mine, theirs):
            b.copy_(a)
        self.timer.sync()
        t["aliases"] = theirs
        return {}

    def _received(self, out: Any) -> Any:
        from cuda_agent.evaluate.transport import build

        return build(out, lambda s: self.importer.open(s).clone())

    def cmd_check(self, trial: str, out: dict[str, Any], plain: bool, atol: float, rtol: float,
                  norm_tol: float, release: bool = True) -> dict[str, Any]:
        from cuda_agent.evaluate.compare import compare, same_bits
        from cuda_agent.evaluate.transport import SpecError, tensors_of

        t = self.trials[trial]
        try:
            got = self._received(out)
        except (SpecError, RuntimeError) as exc:  # a descriptor torch refuses is a bad one too
            return {"code": Code.STRUCTURE_MISMATCH.value,
                    "message": f"the candidate's output cannot be received: {exc}"}
        self.timer.sync()
        result: dict[str, Any] = {"code": None, "message": ""}
        for i, (a, b) in enumerate(zip(tensors_of(t["inputs"]), t.get("aliases", []))):
            if not same_bits(a, b):
                result = {"code": Code.INPUT_MODIFIED.value,
                          "message": f"input {i} was modified by the candidate; inputs are read-only"}
                break
        else:
            if not plain:
                result = {"code": Code.NOT_PLAIN_TENSOR.value,
                          "message": "outputs must be plain torch.Tensor objects, not subclasses or proxies"}
            else:
                stats: dict[str, float] = {"max_abs": 0.0, "rel_norm": 0.0}
                if m := compare(t["ref"], got, atol=atol, rtol=rtol, norm_tol=norm_tol, stats=stats):
                    result = {"code": m.code.value, "message": m.message}
                else:
                    result["error"] = stats
        del got
        if release:  # a finished trial: free its inputs, reference and mapped buffers
            del self.trials[trial]
        self.importer.close()
        return result

    def cmd_compile(self, trial: str) -> dict[str, Any]:
        import torch

        try:
            self.compiled = torch.compile(self.model)
            with torch.no_grad():
                self.compiled(*self.trials[trial]["inputs"])
            self.timer.sync()
        except Exception as exc:
            self.compiled = None
            return {"error": _trace(exc, 2000)}
        return {"error": None}

    def cmd_time(self, which: str, trials: list[str], budget_s: float, min_iters: int,
                 max_iters: int, warmup: int) -> dict[str, Any]:
        fn = self.model if which == "eager" else self.compiled
        assert fn is not None, which
        samples, _, _ = self.timer.run(fn, [self.trials[t]["inputs"] for t in trials],
                                       budget_s=budget_s, min_iters=min_iters,
                                       max_iters=max_iters, warmup=warmup)
        return {"samples": samples}


def _stress(x: Any, variant: int) -> Any:
    """Inputs beyond the task's distribution: signed and scaled (floating tensors only)."""
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return x
    scale, shift = [(-4.0, 0.5), (8.0, -1.0)][variant % 2]
    return x * scale + shift


# --- the candidate's runner ------------------------------------------------------------------------

class Runner:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def cmd_load(self, stage_dir: str, extension: str | None, device: str, init_seed: int,
                 init_inputs: dict[str, Any], shm_dir: str) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate.timing import Timer
        from cuda_agent.evaluate.transport import Exporter, describe, from_inline

        self.device = _device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.exporter = Exporter(self.device, Path(shm_dir))
        self.timer = Timer(self.device)
        os.chdir(stage_dir)
        sys.path.insert(0, stage_dir)
        if extension:
            try:
                _import_file("cuda_extension", Path(extension))
            except Exception as exc:
                raise Failure(Code.LOAD_ERROR, f"the built extension failed to load:\n{_trace(exc)}")
        try:
            mod = _import_file("model_new", Path(stage_dir) / "model_new.py")
        except Exception as exc:
            code = Code.COMPILE_ERROR if _from_cpp_extension(exc) else Code.LOAD_ERROR
            raise Failure(code, f"importing model_new.py failed:\n{_trace(exc)}")
        model_cls = getattr(mod, "ModelNew", None)
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise Failure(Code.NO_MODEL_NEW, "the candidate defines no class ModelNew (a torch.nn.Module)")
        try:
            torch.manual_seed(init_seed)
            self.model = model_cls(*from_inline(init_inputs, torch.device("cpu"))).to(self.device).eval()
        except Exception as exc:
            code, msg = classify(exc)
            raise Failure(code if code is not Code.RUNTIME_ERROR else Code.INIT_ERROR,
                          f"ModelNew(*get_init_inputs()) failed:\n{msg}")
        self.state = {k: self.exporter.empty(describe(v)) for k, v in self.model.state_dict().items()}
        return {"state": {k: self.exporter.export_allocated(v) for k, v in self.state.items()}}

    def cmd_load_weights(self) -> dict[str, Any]:
        self.model.load_state_dict(self.state, strict=True)
        self.timer.sync()
        del self.state
        self.exporter.release()
        return {}

    def cmd_alloc(self, key: str, spec: dict[str, Any]) -> dict[str, Any]:
        from cuda_agent.evaluate.transport import build, describe

        self.values[key] = value = build(spec, self.exporter.empty)
        return {"spec": describe(value, self.exporter.export_allocated)}

    def _call(self, args: list[Any]) -> Any:
        import torch

        with torch.no_grad():
            out = self.model(*args)
        self.timer.sync()
        return out

    def _export_out(self, out: Any) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate.transport import describe, tensors_of

        plain = all(type(t) is torch.Tensor for t in tensors_of(out))
        return {"out": describe(out, self.exporter.export), "plain": plain}

    def cmd_run(self, key: str) -> dict[str, Any]:
        self.exporter.release()  # earlier exports were received (the judge mapped or cloned them)
        return self._export_out(self._call(self.values[key]))

    def cmd_time(self, keys: list[str], budget_s: float, min_iters: int, max_iters: int,
                 warmup: int) -> dict[str, Any]:
        self.exporter.release()
        samples, out, idx = self.timer.run(self.model, [self.values[k] for k in keys],
                                           budget_s=budget_s, min_iters=min_iters,
                                           max_iters=max_iters, warmup=warmup)
        return {"samples": samples, "key": keys[idx], **self._export_out(out)}

    def cmd_release(self, keys: list[str]) -> dict[str, Any]:
        for k in keys:
            self.values.pop(k, None)
        self.exporter.release()
        return {}


# --- main loop -------------------------------------------------------------------------------------

def serve(handler: Any, chan: Channel) -> None:
    while True:
        try:
            msg = chan.recv()
        except ChannelClosed:
            return
        cmd = msg.get("cmd")
        if cmd == "exit":
            return
        fn = getattr(handler, f"cmd_{cmd}", None)
        try:
            if fn is None:
                raise Failure(Code.INFRA_ERROR, f"unknown command {cmd!r}")
            reply = {"ok": True, **fn(**msg.get("args", {}))}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from candidate code too
            code, message = classify(exc)
            reply = {"ok": False, "code": code.value, "message": message}
        chan.send(reply)


def main() -> None:
    role = sys.argv[1]
    fd = int(os.environ.pop("CUDA_AGENT_CHANNEL_FD"))
    chan = Channel(socket.socket(fileno=fd))
    handler = Judge() if role == "judge" else Runner()
    import torch  # noqa: F401  (warm before the first command)

    chan.send({"ok": True, "ready": role, "pid": os.getpid()})
    serve(handler, chan)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: CUDA IPC and extension destructors can hang or crash it


if __name__ == "__main__":
    main()
