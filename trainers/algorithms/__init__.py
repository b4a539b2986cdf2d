"""The algorithms: TRL rows from rollouts, GRPO, PPO, SFT and DPO (and their rounds of rollout ->
training, chosen on validation), length-grouped micro-batches, crash-safe checkpoints."""
