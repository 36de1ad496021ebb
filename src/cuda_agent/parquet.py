"""Parquet files written whole or not at all: rows go to a temporary file beside the target, which
then replaces it, so a reader (or a run that resumes) never sees half a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.errors import CudaAgentError


def write_rows(path: str | Path, rows: list[dict[str, Any]], schema: Any = None) -> Path:
    """Write `rows` (dicts) to the Parquet file `path`, with the pyarrow `schema` when given (else
    inferred). CudaAgentError, saying what to install, when pyarrow is missing."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise CudaAgentError("writing Parquet needs pyarrow: pip install 'cuda-agent[data]'") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    tmp.replace(path)
    return path
