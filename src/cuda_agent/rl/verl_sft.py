"""verl's multi-turn SFT dataset over the RFT files (rl.rft), whose `messages` and `tools` columns
are JSON text: set `data.custom_cls.path=pkg://cuda_agent.rl.verl_sft` and
`data.custom_cls.name=JsonMultiTurnSFTDataset` (the RFT recipe does). Imports verl."""

from __future__ import annotations

import json

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


def _decoded(value):
    return json.loads(value) if isinstance(value, str) else value


class JsonMultiTurnSFTDataset(MultiTurnSFTDataset):
    """MultiTurnSFTDataset, with the JSON-text columns decoded once after reading."""

    def _read_files_and_process(self):
        super()._read_files_and_process()
        for key in (self.messages_key, self.tools_key):
            if key in self.dataframe.columns:
                self.dataframe[key] = self.dataframe[key].map(_decoded).astype(object)
        self.messages = list(self.dataframe[self.messages_key])
        if self.tools_key in self.dataframe.columns:
            self.tools = list(self.dataframe[self.tools_key])
