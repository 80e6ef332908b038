"""Shared pytest setup: make the flat repo root importable and keep torch to the 2 CPU cores."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(min(2, torch.get_num_threads()))

# The real data files live beside the repo (never copied in); tests that need them skip without them.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
