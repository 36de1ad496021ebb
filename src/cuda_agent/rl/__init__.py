"""Training on verl (DESIGN section 7): the agent's trajectories as training data and rewards.

- `trajectory`: an episode's trajectory.jsonl read back as the conversation the model had, with what
  RFT filters on (reward, invalid tool calls, redundant loops).
- `rft`: rejection fine-tuning data: the trajectories that pass, in verl's multi-turn SFT format.
- `values`: GAE value targets (gamma = 1, lambda = 0.95, the outcome reward on the last policy token)
  for the critic's warm-up.
- `reward`: the single-turn reward: the candidate in one response, scored by the evaluator.

Nothing here imports verl; the modules that plug into it import it themselves.
"""
