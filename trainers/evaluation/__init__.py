"""Evaluation: held-out episodes, the metrics multi-agent results report, role maps to play."""
