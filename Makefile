PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint bench bench-peers demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check streamguard tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check streamguard tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/engine.py

# The comparison with the in-process peer guards (bench/peers.py) runs in a venv of its
# own, so the peers never enter .venv. `make bench-peers PEERS_ARGS="--scale 0.1 --json"`
# passes options through.
PEERS_VENV ?= .venv-peers
PEERS_BIN := $(PEERS_VENV)/bin
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS := agent-watchdog==0.1.5 agentcap-guard==0.1.0 agent-budget-guard-py==0.4.0 \
	loop-guardrail==1.0.0 agentseatbelt==0.3.0

$(PEERS_BIN)/python:
	$(PYTHON) -m venv $(PEERS_VENV)
	printf '*\n' > $(PEERS_VENV)/.gitignore

$(PEERS_STAMP): $(PEERS_BIN)/python pyproject.toml Makefile
	$(PEERS_BIN)/python -m pip install --quiet --upgrade pip
	$(PEERS_BIN)/python -m pip install --quiet -e . $(PEERS)
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	$(PEERS_BIN)/python bench/peers.py $(PEERS_ARGS)

# `make demo DEMO_ARGS="--duration 60"` passes options through.
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/streamguard demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) $(PEERS_VENV) .pytest_cache build *.egg-info
