"""Evaluation: held-out episodes, the metrics multi-agent results report, the model-alone
baseline, the held-out guard, role maps to play, and the reports of evaluations and runs."""
