"""The report of an evaluation and of a run: markdown tables (`tables`: one evaluation;
`summary`: a run's before/after), the verification gap (`verification`), plots (`plots`) and
the training console (`console`)."""
