"""The CUDA transport between a candidate's process and the judge: values arrive intact, writes to
input slots reach the candidate, forged descriptors are refused, and a kept judge unmaps every
segment of the candidate's memory (or says that it could not)."""

import base64
import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

torch = pytest.importorskip("torch")

from cuda_agent.evaluate.transport import Importer, SpecError  # noqa: E402

CANDIDATE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from cuda_agent.evaluate.transport import Exporter
    torch.cuda.set_device(0)
    ex = Exporter(torch.device("cuda", 0), Path(sys.argv[1]), segments=sys.argv[2] == "1")
    big = torch.arange(1 << 20, dtype=torch.float32, device="cuda")  # 4 MiB: a large-pool segment
    y = torch.arange(12, dtype=torch.float32, device="cuda").to(torch.bfloat16).reshape(3, 4).t()
    slot = ex.empty({"dtype": "float32", "shape": [4], "stride": [1]})
    slot.zero_()
    torch.cuda.synchronize()
    print(json.dumps({"x": ex.export(big[1000:1010]), "y": ex.export(y), "big": ex.export(big),
                      "slot": ex.export_allocated(slot)}), flush=True)
    sys.stdin.readline()  # the judge wrote into the slot
    print(json.dumps(slot.tolist()), flush=True)
    sys.stdin.readline()
""")


@pytest.fixture
def candidate(tmp_path):
    procs = []

    def start(segments: bool):
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        p = subprocess.Popen([sys.executable, "-c", CANDIDATE, str(tmp_path), "1" if segments else "0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        procs.append(p)
        return p, json.loads(p.stdout.readline())

    yield start
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.gpu
@pytest.mark.parametrize("segments", [True, False], ids=["segments", "torch"])
def test_values_cross_intact_and_slot_writes_reach_the_candidate(candidate, tmp_path, segments):
    proc, specs = candidate(segments)
    assert specs["x"]["buf"]["kind"] == ("cuda_seg" if segments else "cuda_ipc")
    imp = Importer(torch.device("cuda", 0), tmp_path)
    x = imp.open(specs["x"]).clone()
    y = imp.open(specs["y"]).clone()
    assert torch.equal(x.cpu(), torch.arange(1000, 1010, dtype=torch.float32))
    assert y.shape == (4, 3) and y.stride() == (1, 4)
    assert torch.equal(y.cpu(), torch.arange(12, dtype=torch.float32).to(torch.bfloat16).reshape(3, 4).t())
    imp.close()
    alias = imp.open_pinned(specs["slot"])
    alias.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda"))
    torch.cuda.synchronize()
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline()) == [1.0, 2.0, 3.0, 4.0]
    del alias
    assert imp.close(everything=True) == 0


@pytest.mark.gpu
def test_segments_are_mapped_once_bounded_by_the_driver_and_unmapped_at_the_end(candidate, tmp_path):
    _, specs = candidate(True)
    imp = Importer(torch.device("cuda", 0), tmp_path)
    assert specs["x"]["buf"]["handle"] == specs["big"]["buf"]["handle"]  # one allocation
    assert specs["x"]["buf"]["offset_bytes"] == specs["big"]["buf"]["offset_bytes"]  # one storage
    assert specs["x"]["buf"]["storage_offset"] == 1000
    imp.open(specs["x"])
    imp.open(specs["big"])
    assert len(imp.segment_bytes) == 1

    def forged(**buf):
        s = copy.deepcopy(specs["x"])
        s["buf"].update(buf)
        return s

    # the bounds are the allocation's, as the driver reports it, whatever size_bytes claims
    seg_bytes = imp.segment_bytes[0]
    at = specs["big"]["buf"]["offset_bytes"]
    elems = (seg_bytes - at) // 4  # float32s from big's start to the segment's end
    imp.open({**specs["big"], "shape": [elems], "buf": {**specs["big"]["buf"], "size_bytes": 1 << 40}})
    with pytest.raises(SpecError, match="runs past its segment"):
        imp.open({**specs["big"], "shape": [elems + 1], "buf": {**specs["big"]["buf"], "size_bytes": 1 << 40}})
    with pytest.raises(SpecError, match="runs past its segment"):
        imp.open(forged(storage_offset=elems - 5, size_bytes=1 << 40))  # ten elements from five before the end
    with pytest.raises(SpecError, match="runs past its segment"):
        imp.open(forged(offset_bytes=at + seg_bytes))
    with pytest.raises(SpecError, match="bad offset_bytes"):
        imp.open(forged(offset_bytes=specs["x"]["buf"]["offset_bytes"] + 2))  # not float32-aligned
    with pytest.raises(SpecError, match="cannot open CUDA IPC buffer"):
        imp.open(forged(handle=base64.b64encode(bytes(64)).decode()))
    with pytest.raises(SpecError, match="bad IPC handle"):
        imp.open(forged(handle=base64.b64encode(bytes(8)).decode()))

    imp.close()
    assert imp.close(everything=True) == 0 and not imp.segment_bytes
    kept = imp.open(specs["big"])  # mapped again, and a view outlives the evaluation
    assert imp.close(everything=True) == 1
    assert kept[5].item() == 5.0  # still mapped: the judge says so instead of unmapping under it
