"""Fetch a pretrained model by name into the local cache (also ``mathteams models``):
`agents.models`. ``python scripts/models.py get smollm2-135m-instruct``, then pass
``--model_name_or_path smollm2-135m-instruct`` to any script."""

from agents.models import main

if __name__ == "__main__":
    raise SystemExit(main())
