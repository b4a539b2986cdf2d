"""The learned verifier: labelled rows from episodes and a classifier scoring P(correct)."""
