"""
sft.py with the field's model families registered (methods.dream), run as __main__ unchanged: its flags,
checks, loop and saves, so a Dream --model-dir trains as a LLaDA one does. Under torchrun too:

    python -m methods.dream --out-dir out/tiny-dream
    python -m methods.sft --model-dir out/tiny-dream --out-dir out/dream-sft --max-steps 20
    torchrun --nproc_per_node=2 -m methods.sft --model-dir out/tiny-dream --fsdp ...
"""
import runpy
import sys
from pathlib import Path

import methods.dream  # noqa: F401  (registers the Dream family)

SFT = Path(__file__).resolve().parents[1] / "sft.py"


def main():
    """sft.py as __main__, with sys.argv as given (its messages name sft.py)."""
    sys.argv[0] = str(SFT)
    runpy.run_path(str(SFT), run_name="__main__")


if __name__ == "__main__":
    main()
