"""The algorithms: TRL rows from rollouts, GRPO, PPO, SFT and DPO, length-grouped micro-batches."""
