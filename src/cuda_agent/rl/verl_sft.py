"""verl's multi-turn SFT dataset over the RFT files (rl.rft), whose `messages` and `tools` columns
are JSON text: set `data.custom_cls.path=pkg://cuda_agent.rl.verl_sft` and
`data.custom_cls.name=JsonMultiTurnSFTDataset` (the RFT recipe does). Imports verl."""

from __future__ import annotations

import json

import pandas as pd
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


def _decoded(column: pd.Series) -> pd.Series:
    """The column's JSON text as Python objects, in an object column: pandas' own `map` would infer
    an Arrow struct type again, with the very nulls the JSON text avoids."""
    return pd.Series([json.loads(v) if isinstance(v, str) else v for v in column], index=column.index, dtype=object)


class JsonMultiTurnSFTDataset(MultiTurnSFTDataset):
    """MultiTurnSFTDataset, with the JSON-text columns decoded once after reading."""

    def _read_files_and_process(self):
        super()._read_files_and_process()
        for key in (self.messages_key, self.tools_key):
            if key in self.dataframe.columns:
                self.dataframe[key] = _decoded(self.dataframe[key])
        self.messages = list(self.dataframe[self.messages_key])
        if self.tools_key in self.dataframe.columns:
            self.tools = list(self.dataframe[self.tools_key])
