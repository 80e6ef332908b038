"""
eval.py with the field's samplers: `python -m methods.eval [eval.py's flags] [--cache prefix|dual]
[--threshold τ] [--remasking ORDER]` runs eval.py's protocol unchanged (eval.main: its items, schedule,
checks, result dirs, manifest, --resume, --rescore) with methods/sampling.generate as the sampler:

    --cache prefix | dual   Fast-dLLM's key/value cache (approximate; no meaning on Dream's shifted logits)
    --threshold τ           Fast-dLLM's parallel unmasking: also write every blank the model is this sure of
    --remasking ORDER       LLaDA's orders, or Dream's: origin | maskgit_plus | topk_margin | entropy (eps 1e-3)

With none of them it is eval.py's exact sampler, token for token. Each manifest records cache and threshold
(--resume refuses a changed one). The Dream family is registered, so a Dream --model-dir evaluates too.

Run:
    python -m methods.eval --model-dir out/toy/seed1/grpo --block-length 8 --cache dual --threshold 0.9
    torchrun --nproc_per_node=8 -m methods.eval --model-dir Dream-org/Dream-v0-Instruct-7B --task gsm8k \\
        --data openai/gsm8k:main:test --remasking entropy --out-dir out/eval/dream
"""
import eval as evaluation
import methods.dream  # noqa: F401  (registers the Dream family: a Dream --model-dir loads)
from methods import sampling
from ops.checks import require, upfront


def build_parser():
    """eval.py's flags and the field sampler's."""
    parser = evaluation.build_parser()
    parser.description = ("d1-compatible evaluation with the field's samplers (methods/sampling.py); --remasking "
                          f"takes {' | '.join(sampling.ORDERS)}")
    parser.add_argument("--cache", type=str, default="", choices=["", *sampling.CACHE_MODES[1:]],
                        help="'' = exact sampler (d1, the default); prefix / dual = Fast-dLLM KV cache (approximate)")
    parser.add_argument("--threshold", type=float, default=0.0, help="0 = off; Fast-dLLM parallel unmasking (0.9)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    with upfront():  # one line, exit 2, before anything runs (eval.main checks the rest)
        require(args.threshold == 0 or (0 < args.threshold <= 1 and args.remasking == "low_confidence"),
                f"--threshold must be 0 (off) or in (0, 1] with --remasking low_confidence, got {args.threshold}")
        sampling.check_cache_applies(args.model_dir, args.cache)
    # the sampler's own keywords, passed on every call and recorded in every manifest (None: off)
    options = {"cache": args.cache or None, "threshold": args.threshold or None}
    evaluation.main(args, sampler=sampling.generate, orders=sampling.ORDERS, options=options)


if __name__ == "__main__":
    main()
