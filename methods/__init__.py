"""
The field's methods beside d1, one file each (docs/files.md lists them). They import the core (the
eight top files and what they import) and run through their own entry points, which reuse the core's
phases and loops, never as a branch inside d1's functions; the core never imports them:

    python -m methods.grpo     grpo.py's round with --objective NAME (OBJECTIVES: wd1, justgrpo, spg,
                               espo, gdsd, trajectory), --estimator, Fast-dLLM's --rollout-*, the presets
    python -m methods.eval     eval.py with the field's samplers (--cache / --threshold / Dream's --remasking)
    python -m methods.sft      sft.py with the field's model families (a Dream --model-dir)
    python -m methods.sampling the field's sampler demo
    python -m methods.dream    writes a tiny Dream

Each file opens with its paper, its equations, what it needs from a round and its cost in forward
passes; a deviation from the paper's released code is said where it happens (docs/objectives.md).
"""
