"""The training scripts' runs: flags, evaluate / train / evaluate, results, the time budget."""
