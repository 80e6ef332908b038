# Every target creates the virtualenv it needs: torch 2.13.0 first (a CPU wheel of exactly that
# version is on the machine; any other spec would pull GBs of CUDA packages), then requirements.txt.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test shape run tiny closure lab-estimators lab-ablations code-toy testbed rank-objectives gpu-check clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

run: install                   ## the CPU pipeline on the tiny model, 3 seeds: SFT -> diffu-GRPO -> eval table
	bash lab/runs/toy.sh

test: install                  ## the whole test suite, CPU, about 16 minutes on 2 cores
	$(PY) -m pytest tests -q -m "not shape"

shape: install                 ## the developers' budget: each of the eight 70 lines under the cap (CI runs it)
	$(PY) -m pytest tests -q -m shape

lab-estimators: install        ## every estimator and objective likelihood vs exact values on the toy (trains seed 0 first if needed)
	[ -f out/toy/seed0/grpo/config.json ] || bash lab/runs/toy.sh 0
	$(PY) -m lab.study_estimators

lab-ablations: install         ## d1's ablations in miniature, 3 seeds, held-out curves (lab/runs/ablations.sh)
	bash lab/runs/ablations.sh

code-toy: install              ## the CPU code toy, 3 seeds: SFT -> diffu-GRPO on executed tests -> held-out table
	bash lab/runs/code_toy.sh

testbed: install               ## the testbed (docs/testbed.md), 5 seeds: SFT alone vs SFT + diffu-GRPO, paired 95% CI
	$(PY) -m lab.compare --a "--rounds 0" --b "" --seeds 0,1,2,3,4

rank-objectives: install       ## every objective on make run's toy, 5 seeds, paired against diffu-GRPO: the table
	$(PY) -m lab.rank_objectives

tiny: install                  ## write the tiny LLaDA to out/tiny-llada and run one forward
	$(PY) -m modelio.checkpoint

closure: install               ## d1's import closure (the eight files and what they import): files and lines; fails if it imports methods/ or lab/
	$(PY) -m lab.closure --check

# a GPU box's own Python (its CUDA torch), not the CPU venv; bitsandbytes for the 4-bit checks
GPU_PY ?= python3
GPU_CHECK_ARGS ?=
gpu-check:                     ## on a CUDA machine: CUDA tests, every script on CUDA, the 8B shape measured (~10 min)
	$(GPU_PY) -m lab.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) out
