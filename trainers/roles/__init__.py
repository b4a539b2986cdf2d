"""Per-role training: a LoRA adapter per role on one base model, or a full model per role."""
