"""
The statistic d1 left out: d1 reports one greedy run per setting, with no interval. mean_and_spread
says how much of a number over a few seeds is noise: eval.py --seeds N at temperature > 0, and
the studies over training seeds.

Pure Python: no model, no GPU.
"""
import math
import statistics


def mean_and_spread(values):
    """Mean, sample std and the 95% t-interval half-width of a short list of per-seed numbers."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, float("nan")
    # sample std (n - 1): the seeds are a sample of the sampling noise
    sd = statistics.stdev(values)
    # Student t 97.5 % quantiles by sample count n (n - 1 degrees of freedom), 3 decimals; beyond 10
    # seeds 1.96 + 2.4 / n is within 3% of the exact value and tends to the normal 1.96
    t975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306,
            10: 2.262}.get(n, 1.96 + 2.4 / n)
    # half-width of the 95% interval of the MEAN over seeds (the standard error times t)
    return mean, sd, t975 * sd / math.sqrt(n)
