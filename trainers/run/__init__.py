"""The training scripts' runs: flags, evaluate / train / evaluate, results, crash-safe resume."""
