"""The gate's benchmark suite: ``python -m bench`` (see ``bench/run.py``)."""

import os

# Set before any module of the suite imports litellm (otherwise it fetches its price map).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
