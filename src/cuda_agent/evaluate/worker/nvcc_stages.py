"""nvcc's own steps for one CUDA unit, with its host and device front ends side by side.

nvcc compiles a `.cu` file in two chains that run one after the other:

    host:   gcc -E (host)   -> cudafe++ (EDG front end: host C++, the launch stubs, the module id)
    device: gcc -E (device) -> cicc (front end and optimiser) -> ptxas -> fatbinary
    then:   gcc -c of cudafe++'s output, which includes cicc's stub and the fatbinary

For a unit that includes torch's headers both front ends parse all of them, and the two front ends
are most of nvcc's time (each step's time: docs/measured/2026-12-04-fresh-h200.md, "nvcc's front
ends side by side"). The chains share one thing only, the module id (a name derived from the
source, which cudafe++ writes and cicc reads), and cicc can derive it itself
(`--gen_module_id_file`). So `compile` asks nvcc for its commands (`--dryrun --keep`), runs the
chains at once with cicc deriving its own module id, checks that both ids are the same, then runs
the final host compile: the unit's critical path becomes the host chain and the final compile, the
device chain running beside the host chain on a second core.

The commands are nvcc's own, in its order within each chain, with its environment; the object file
is the one nvcc makes with `--keep` (byte for byte). What the build sees is what nvcc would show:
each step's output in nvcc's order, up to the first step that fails, and that step's exit status.
The other chain is stopped once it can no longer matter. Where nvcc's plan is not the shape known
here (another tool in front of nvcc, several units, an option that changes the plan, a step that is
not a command), `compile` returns None and the caller runs nvcc as it is.

Standard library only: it runs inside `light_nvcc.py`, before anything else of the package loads.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

try:
    from . import nvcc_pch
except ImportError:  # imported by light_nvcc.py run as a script: its folder holds the module
    import nvcc_pch  # type: ignore[no-redef]

STEP = "#$ "
ASSIGNMENT = re.compile(r"([A-Za-z_]\w*)=(.*)\Z", re.S)
VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")
MODULE_ID = "--module_id_file_name"
DEPENDENCIES = {"--generate-dependencies-with-compile", "-MD"}
DEPENDENCY_OUTPUT = {"--dependency-output", "-MF"}
# options that change or report nvcc's plan: with these the unit is compiled by nvcc as it is
PLAN_OPTIONS = re.compile(r"--?(dryrun|keep|keep-dir|save-temps|time|run|E|M|MM|preprocess|"
                          r"generate-dependencies|generate-nonsystem-dependencies|lib|link|dlink|"
                          r"device-link|ptx|cubin|fatbin|cuda|optix-ir|threads|split-compile)(=.*)?\Z")
UNUSED = "-"  # a step that did not run (its chain stopped first)


@dataclass
class Compiled:
    """What the build sees: nvcc's exit status and output; and, for reports, what became of the
    final compile's precompiled header (`nvcc_pch.py`): used, built, or "" (neither)."""
    returncode: int
    stdout: bytes
    stderr: bytes
    header: str = ""


@dataclass
class Step:
    index: int  # its place in nvcc's plan, which is the order its output is shown in
    argv: list[str]
    returncode: int | str = UNUSED
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class Plan:
    env: dict[str, str]
    host: list[Step]
    device: list[Step]
    final: Step
    module_id: str  # cudafe++'s
    device_module_id: str  # cicc's own
    cpp_out: str  # cudafe++'s output, the final compile's input
    pch_dir: str | None = None  # where the final compile's precompiled headers live (None: not used)
    notes: bytes = b""  # nvcc's own messages while planning (its warnings)
    running: dict[int, subprocess.Popen] = field(default_factory=dict)
    failed_at: float = float("inf")
    lock: threading.Lock = field(default_factory=threading.Lock)


def _option(args: list[str], names: set[str]) -> str | None:
    for i, a in enumerate(args[:-1]):
        if a in names:
            return args[i + 1]
    return None


def _without_dependencies(args: list[str]) -> tuple[list[str], str | None]:
    """`args` without the dependency-file options, and the file they name (None: none asked)."""
    wanted = any(a in DEPENDENCIES for a in args)
    path = _option(args, DEPENDENCY_OUTPUT)
    if not wanted:
        return args, None
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in DEPENDENCY_OUTPUT:
            skip = True
        elif a not in DEPENDENCIES:
            kept.append(a)
    return kept, path


def _expand(word: str, env: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)


def plan(real: list[str], args: list[str], keep_dir: str, pch_dir: str | None = None) -> Plan | None:
    """nvcc's commands for `args`, split into the host chain, the device chain and the final
    compile; None where the plan is not of the shape known here."""
    if len(real) != 1 or os.path.basename(real[0]) != "nvcc" or any(PLAN_OPTIONS.match(a) for a in args):
        return None
    out, source = _option(args, {"-o", "--output-file"}), _option(args, {"-c", "--compile"})
    if out is None or source is None or not source.endswith(".cu"):
        return None
    dry_args, depfile = _without_dependencies(args)
    if any(a in DEPENDENCIES for a in args) and depfile is None:
        return None
    try:
        dry = subprocess.run([*real, "--dryrun", "--keep", "--keep-dir", keep_dir, *dry_args],
                             capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    env, steps, notes = dict(os.environ), [], []
    for line in dry.stderr.decode(errors="replace").splitlines():
        if not line.startswith(STEP):
            notes.append(line)
            continue
        text = line[len(STEP):].strip()
        assignment = ASSIGNMENT.match(text)
        if assignment:
            env[assignment.group(1)] = assignment.group(2).strip()
            continue
        if text.startswith("-"):
            return None  # a step nvcc does itself ("-- Filter Dependencies --"): not asked for here
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        if words:  # nvcc names a program by its variables ("$CICC_PATH/cicc"); its arguments are literal
            steps.append([_expand(words[0], env), *words[1:]])
    if dry.returncode != 0 or len(steps) < 4:
        return None
    tools = [os.path.basename(s[0]) for s in steps]
    if tools.count("cudafe++") != 1 or "cicc" not in tools:
        return None
    cudafe = steps[tools.index("cudafe++")]
    module_id, cpp_out = _option(cudafe, {MODULE_ID}), _option(cudafe, {"--gen_c_file_name"})
    host_input = cudafe[-1]
    if "--gen_module_id_file" not in cudafe or module_id is None or cpp_out is None:
        return None
    final = steps[-1]
    if cpp_out not in final or "-c" not in final or _option(final, {"-o"}) != out:
        return None
    preprocess = [i for i, s in enumerate(steps) if _option(s, {"-o"}) == host_input]
    if len(preprocess) != 1:
        return None
    host_at = {preprocess[0], tools.index("cudafe++")}
    device_module_id = module_id + ".device"
    host, device, derived = [], [], False
    for i, argv in enumerate(steps[:-1]):
        if i in host_at:
            host.append(Step(i, argv))
            continue
        if os.path.basename(argv[0]) == "cicc":
            argv = list(argv)
            at = argv.index(MODULE_ID) if MODULE_ID in argv else -1
            if at < 0 or argv[at + 1] != module_id:
                return None
            argv[at + 1] = device_module_id
            if not derived:  # the chain's first cicc derives the id; any later one reads it
                argv.insert(at, "--gen_module_id_file")
                derived = True
        if any(host_output in argv for host_output in (module_id, cpp_out, host_input)):
            return None  # a device step that needs the host chain: not known here
        device.append(Step(i, argv))
    if not any(os.path.basename(s.argv[0]) == "cicc" for s in device):
        return None
    if depfile is not None:  # the host preprocessing writes it, as nvcc's own filter would
        host[0].argv += ["-MD", "-MF", depfile, "-MT", out]
    return Plan(env, host, device, Step(len(steps) - 1, final), module_id, device_module_id, cpp_out, pch_dir,
                notes="".join(n + "\n" for n in notes).encode())


def _run_chain(p: Plan, chain: list[Step]) -> None:
    for step in chain:
        with p.lock:
            if step.index > p.failed_at:
                return  # an earlier step of nvcc's order failed: nothing here can be shown
            try:
                proc = subprocess.Popen(step.argv, env=p.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as e:
                step.returncode, step.stderr = 127, f"{step.argv[0]}: {e}\n".encode()
                p.failed_at = min(p.failed_at, step.index)
                return
            p.running[step.index] = proc
        step.stdout, step.stderr = proc.communicate()
        with p.lock:
            del p.running[step.index]
            step.returncode = proc.returncode
            if proc.returncode == 0:
                continue
            p.failed_at = min(p.failed_at, step.index)
            for index, other in p.running.items():
                if index > p.failed_at:
                    other.kill()  # its output would come after the failure's: never shown
            return


def _final(p: Plan) -> str:
    """The final host compile: with a precompiled header of the unit's headers where one is ready
    and the compile with it succeeds without a word of output, else as nvcc plans it (and the
    header built beside it where none is ready). What became of the header (`Compiled.header`)."""
    if p.pch_dir is None:
        _run_chain(p, [p.final])
        return ""
    header, attempt = "", nvcc_pch.prepare(p.pch_dir, p.final.argv, p.cpp_out, os.path.dirname(p.cpp_out), p.env)
    if attempt.argv is not None:
        try:
            done = subprocess.run(attempt.argv, env=p.env, capture_output=True)
            if done.returncode == 0 and not done.stdout and not done.stderr:
                p.final.returncode = 0
                return "used"
        except OSError:
            pass
        header = "not used"  # gcc refused it, or said something: nvcc's own compile decides
    try:
        _run_chain(p, [p.final])
    finally:
        if attempt.building is not None:
            header = "built" if attempt.building.finish() else ""
    return header


def run(p: Plan) -> Compiled | None:
    """Run the plan: both chains at once, then the final compile. None where cicc's module id is
    not cudafe++'s (the caller then runs nvcc as it is)."""
    header = ""
    device = threading.Thread(target=_run_chain, args=(p, p.device), daemon=True)
    device.start()
    _run_chain(p, p.host)
    device.join()
    if p.failed_at == float("inf"):
        try:
            with open(p.module_id, "rb") as a, open(p.device_module_id, "rb") as b:
                same = a.read() == b.read()
        except OSError:
            same = False
        if not same:
            return None
        header = _final(p)
    shown, stdout, stderr = sorted(p.host + p.device + [p.final], key=lambda s: s.index), [], [p.notes]
    for step in shown:
        if step.returncode == UNUSED:
            continue
        stdout.append(step.stdout)
        stderr.append(step.stderr)
        if step.returncode != 0:
            return Compiled(int(step.returncode), b"".join(stdout), b"".join(stderr), header)
    return Compiled(0, b"".join(stdout), b"".join(stderr), header)


def compile(real: list[str], args: list[str], pch_dir: str | None = None) -> Compiled | None:
    """Compile one CUDA unit as `real` (nvcc) would with `args`, its two chains at once; None where
    that cannot be done here (the caller runs nvcc itself). `pch_dir`: where the final compile's
    precompiled headers live (`nvcc_pch.py`; None: not used)."""
    out = _option(args, {"-o", "--output-file"})
    keep_dir = tempfile.mkdtemp(prefix=".nvcc-", dir=os.path.dirname(os.path.abspath(out)) if out else None)
    try:
        p = plan(real, args, keep_dir, pch_dir)
        return run(p) if p is not None else None
    finally:
        shutil.rmtree(keep_dir, ignore_errors=True)
