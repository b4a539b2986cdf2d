"""The rollout engine: many env copies, every turn batched, recorded as `Episode`s of `Turn`s."""
